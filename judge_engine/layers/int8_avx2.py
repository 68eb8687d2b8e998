"""Exact int8 products with AVX2 integer instructions: ``kernels/int8_avx2.c``, built once per machine and loaded.

On a CPU with AVX2 but without AVX-512 VNNI or AMX (AMD Zen 2/3, Intel before Ice Lake), neither of torch's int8
routes serves the engine: ``torch._int_mm`` (oneDNN) ran exact there but at 1-4 GFLOP/s, and fbgemm's AVX2 int8
linear (torch's deprecated quantized-tensor API) saturates 16-bit pair sums unless activations are cut to 7 bits,
and scales activations per tensor, so a row's result would depend on its batch. The kernel here multiplies with
vpmaddubsw / vpmaddwd on |a| and b carrying a's sign, which never saturates for values in [-127, 127], so its int32
sums are the same integers as every other route (docs/engine-design.md, int8 products).

int8 linear maps' grouped products (scales per group of terms; int8_linear's grouped_matmul calls
``grouped_kernel``) come from ``kernels/int8_groups_avx2.c``, in one pass: int8_groups_vnni.c's layout (each 32-bit
lane one output column, four terms at a time) with the same pair products in place of vpdpbusd.

Built once per machine and loaded by layers/c_kernels.py; without a C compiler, or on a CPU without AVX2, the
kernel is unavailable and the engine uses another exact route.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels

ENTRY_POINT = "int8_avx2_matmul"
GROUPED_ENTRY_POINT = "int8_groups_avx2"


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    return c_kernels.load("int8_avx2.c", ENTRY_POINT, [ctypes.c_void_p] * 3 + [ctypes.c_long] * 6 + [ctypes.c_int])


@functools.lru_cache(maxsize=1)
def grouped_kernel() -> c_kernels.Kernel:
    """The grouped products' kernel, with int8_vnni.kernel's arguments (int8_linear's grouped_matmul calls
    either)."""
    return c_kernels.load("int8_groups_avx2.c", GROUPED_ENTRY_POINT, c_kernels.GROUPED_INT8_ARGUMENTS,
                          restype=ctypes.c_int)


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

