"""The CPU path's attention calls through the engine's own kernel (``kernels/row_attention.c``), built once per
machine: every query row computed by itself in a fixed order from IEEE operations, so its output and log-sum-exp
are the same bits whatever the other rows of the call and whichever x86-64 CPU with AVX2 and FMA runs it.

torch's flash-attention kernel computes its exps with code picked by the CPU's SIMD width (AVX2 or AVX-512), so the
same judgment's probabilities differed between CPUs (docs/benchmarks.md). Where the kernel is unavailable (no AVX2
or FMA, no C compiler), for a dtype other than float32 or a head size it does not take, and with
``JUDGE_ENGINE_ATTENTION=flash``, torch_paged.py calls torch's flash attention, as before.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels

ROUTE_ENV = "JUDGE_ENGINE_ATTENTION"   # "flash": torch's flash attention even where the kernel builds
MAX_HEAD_DIM = 256
HEAD_DIM_QUANTUM = 16


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return c_kernels.load("row_attention.c", "row_attention",
                          [pointer, pointer, pointer, pointer, pointer, pointer, pointer, pointer, i64, i64, i64, i64,
                           i64, ctypes.c_float, ctypes.c_float, pointer, pointer, ctypes.c_int],
                          needs=("avx2", "fma"), restype=ctypes.c_int, off_switch=(ROUTE_ENV, "flash"))


def serves_calls(dtype: torch.dtype, head_dim: int) -> bool:
    """Whether the kernel computes the CPU path's attention calls in ``dtype`` with heads of ``head_dim``."""
    return (dtype == torch.float32 and head_dim % HEAD_DIM_QUANTUM == 0 and head_dim <= MAX_HEAD_DIM
            and kernel().function is not None)


def serves(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """Whether the kernel computes attention of ``q [B, H, L, D]`` over ``k, v [B, H, N, D]`` (and ``mask``)."""
    tensors = [q, k, v] + ([] if mask is None else [mask])
    return (all(t.device.type == "cpu" and t.dtype == q.dtype and t.dim() == 4 and t.stride(-1) == 1
                for t in tensors)
            and k.shape[2] > 0 and serves_calls(q.dtype, q.shape[-1]))


def _strides(t: torch.Tensor, shape: tuple[int, ...]) -> ctypes.Array:
    """The batch, head and row strides of ``t`` read at ``shape`` (a broadcast dimension: stride 0)."""
    return (ctypes.c_int64 * 3)(*(0 if size == 1 and want != 1 else stride
                                  for size, want, stride in zip(t.shape[:3], shape[:3], t.stride()[:3])))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: torch.Tensor | None = None,
           softcap: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs ``[B, H, L, D]`` and log-sum-exps ``[B, H, L]`` (float32) of scaled, optionally soft-capped and
    masked (additive ``mask`` broadcast to ``[B, H, L, N]``) attention."""
    if not serves(q, k, v, mask):
        raise ValueError(f"row_attention: the kernel does not take this call (q {tuple(q.shape)} {q.dtype}, "
                         f"k {tuple(k.shape)}; {kernel().reason})")
    batch, heads, rows, head_dim = q.shape
    keys = k.shape[2]
    out = torch.empty(batch, heads, rows, head_dim, dtype=torch.float32)
    lse = torch.empty(batch, heads, rows, dtype=torch.float32)
    call_shape = (batch, heads, rows)
    strides = [_strides(q, call_shape), _strides(k, call_shape), _strides(v, call_shape)]
    mask_pointer, mask_strides = None, None
    if mask is not None:
        mask_pointer, mask_strides = mask.data_ptr(), _strides(mask, call_shape)
    status = kernel().function(q.data_ptr(), strides[0], k.data_ptr(), strides[1], v.data_ptr(), strides[2],
                               mask_pointer, mask_strides, batch, heads, rows, keys, head_dim, scale,
                               softcap or 0.0, out.data_ptr(), lse.data_ptr(), torch.get_num_threads())
    if status != 0:
        raise MemoryError(f"row_attention: no scratch for {rows} query rows x {keys} keys")
    return out, lse
