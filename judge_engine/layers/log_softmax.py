"""Log-softmax of float32 rows on the CPU through the engine's own kernel (``kernels/log_softmax.c``), built once
per machine, so the log-probabilities the engine reports and scores choices by are the same bits on every x86-64 CPU
with AVX2 and FMA: torch's ``log_softmax`` computes its exps with code picked by the CPU's SIMD width.

Elsewhere (no AVX2 or FMA, no C compiler, another dtype or device, ``JUDGE_ENGINE_ATTENTION=flash``, which turns
off both of the engine's softmax kernels), ``torch.log_softmax``.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels
from judge_engine.layers.attention.row_attention import ROUTE_ENV


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return c_kernels.load("log_softmax.c", "log_softmax", [pointer, i64, i64, i64, pointer], needs=("avx2", "fma"),
                          off_switch=(ROUTE_ENV, "flash"))


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.log_softmax(x, dim=-1)`` for a 1-D or 2-D ``x``."""
    if not (x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() in (1, 2) and x.shape[-1] > 0
            and kernel().function is not None):
        return torch.log_softmax(x, dim=-1)
    rows = x if x.dim() == 2 else x.unsqueeze(0)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    out = torch.empty(rows.shape, dtype=torch.float32)
    kernel().function(rows.data_ptr(), rows.stride(0), rows.shape[0], rows.shape[1], out.data_ptr())
    return out.view(x.shape)
