"""Exact int8 products with AVX2 integer instructions: ``kernels/int8_avx2.c``, built once per machine and loaded.

On a CPU with AVX2 but without AVX-512 VNNI or AMX (AMD Zen 2/3, Intel before Ice Lake), neither of torch's int8
routes serves the engine: ``torch._int_mm`` (oneDNN) ran exact there but at 1-4 GFLOP/s, and fbgemm's AVX2 int8
linear (torch's deprecated quantized-tensor API) saturates 16-bit pair sums unless activations are cut to 7 bits,
and scales activations per tensor, so a row's result would depend on its batch. The kernel here multiplies with
vpmaddubsw / vpmaddwd on |a| and b carrying a's sign, which never saturates for values in [-127, 127], so its int32
sums are the same integers as every other route (docs/engine-design.md, int8 products).

The same file computes int8 linear maps' grouped products (activation scales per group of terms,
int8_linear.grouped_matmul) in one pass, each group's sums gathered from the tiles' lanes at the group's end.

Built once per machine and loaded by layers/c_kernels.py; without a C compiler, or on a CPU without AVX2, the
kernel is unavailable and the engine uses another exact route.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels

ENTRY_POINT = "int8_avx2_matmul"
GROUPED_ENTRY_POINT = "int8_avx2_grouped"


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    return c_kernels.load("int8_avx2.c", ENTRY_POINT, [ctypes.c_void_p] * 3 + [ctypes.c_long] * 6 + [ctypes.c_int])


@functools.lru_cache(maxsize=1)
def grouped_kernel() -> c_kernels.Kernel:
    """The grouped products' entry point of the same library."""
    found = c_kernels.load("int8_avx2.c", GROUPED_ENTRY_POINT,
                           [ctypes.c_void_p] * 4 + [ctypes.c_long] * 8 + [ctypes.c_int])
    if found.function is not None:
        found.function.restype = ctypes.c_int
    return found


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Exact int32 ``a @ b`` of int8 ``a [M, K]`` and ``b [K, N]`` (a weight [N, K] read transposed, the engine's
    layout), every value of ``b`` in [-127, 127]. Raises RuntimeError where the kernel is unavailable."""
    function = kernel().function
    if function is None:
        raise RuntimeError(f"the AVX2 int8 kernel is unavailable: {kernel().reason}")
    if a.dtype != torch.int8 or b.dtype != torch.int8 or a.device.type != "cpu" or b.device.type != "cpu":
        raise ValueError("the AVX2 int8 kernel multiplies int8 CPU tensors")
    rows, depth = a.shape
    cols = b.shape[1]
    if b.shape[0] != depth:
        raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied")
    a = a if a.stride(1) == 1 else a.contiguous()
    weight = b.t() if b.stride(0) == 1 else b.t().contiguous()   # [N, K], K-contiguous
    out = torch.empty((rows, cols), dtype=torch.int32)
    if rows and cols:
        function(a.data_ptr(), weight.data_ptr(), out.data_ptr(), rows, cols, depth, a.stride(0), weight.stride(0),
                 out.stride(0), torch.get_num_threads())
    return out


def grouped_matmul(q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, group: int) -> torch.Tensor:
    """float32 [M, N]: ``sum_g float(q_g @ weight_g.T) * scales[:, g]``, groups of ``group`` terms in order (the last
    one may be shorter; ``group`` a multiple of 32 up to 1024), for int8 ``q [M, K]`` and ``weight [N, K]`` (values in
    [-127, 127]) and float32 ``scales [M, ceil(K / group)]``: int8_linear.grouped_matmul's bits. Raises RuntimeError
    where the kernel is unavailable."""
    function = grouped_kernel().function
    if function is None:
        raise RuntimeError(f"the AVX2 int8 kernel is unavailable: {grouped_kernel().reason}")
    rows, depth = q.shape
    if q.dtype != torch.int8 or weight.dtype != torch.int8 or scales.dtype != torch.float32:
        raise ValueError("the AVX2 kernel's grouped products take int8 activations and weights, float32 scales")
    if weight.shape[1] != depth or scales.shape != (rows, -(-depth // group)) or group % 32 or not 0 < group <= 1024:
        raise ValueError(f"shapes {tuple(q.shape)}, {tuple(scales.shape)} and {tuple(weight.shape)} do not match "
                         f"groups of {group} terms (a multiple of 32, at most 1024)")
    q = q if q.stride(1) == 1 else q.contiguous()
    weight = weight if weight.stride(1) == 1 else weight.contiguous()
    scales = scales if scales.stride(1) == 1 else scales.contiguous()
    out = torch.empty((rows, weight.shape[0]), dtype=torch.float32)
    if rows and weight.shape[0]:
        function(q.data_ptr(), weight.data_ptr(), scales.data_ptr(), out.data_ptr(), rows, weight.shape[0], depth,
                 group, q.stride(0), weight.stride(0), scales.stride(0), out.stride(0), torch.get_num_threads())
    return out
