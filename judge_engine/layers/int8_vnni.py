"""int8 products with activation scales per group of terms, on AVX-512 VNNI: ``kernels/int8_groups_vnni.c``, built
once per machine and loaded.

The kernel computes what int8_linear.grouped_matmul's other routes compute by slices (each group's exact integer
sums, times the row's scale for the group, added group after group), the whole product in one pass: the groups'
sums stay in registers, where the slices write every group's int32 sums out and read them back. It gives the same
bits as the slices (int8_linear probes that before using it).

Built once per machine and loaded by layers/c_kernels.py; on a CPU without AVX-512 VNNI, or without a C compiler,
the kernel is unavailable and grouped products take the slices.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels

ENTRY_POINT = "int8_groups_vnni"
MAX_GROUP = 1024   # the kernel's: a group's integer sum stays below 2^24 (exact in float32)


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    found = c_kernels.load("int8_groups_vnni.c", ENTRY_POINT,
                           [pointer, i64, pointer, i64, i64, i64, i64, pointer, i64, pointer, i64, i64, ctypes.c_int],
                           needs=("avx512f", "avx512bw", "avx512_vnni"))
    if found.function is not None:
        found.function.restype = ctypes.c_int
    return found


def grouped_matmul(q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, group: int) -> torch.Tensor:
    """float32 [M, N]: ``sum_g float(q[:, g] @ weight[:, g].T) * scales[:, g]``, groups of ``group`` terms in order
    (the last one may be shorter), for int8 ``q [M, K]`` and ``weight [N, K]`` (values in [-127, 127]) and float32
    ``scales [M, ceil(K / group)]``. Raises RuntimeError where the kernel is unavailable."""
    function = kernel().function
    if function is None:
        raise RuntimeError(f"the AVX-512 VNNI int8 kernel is unavailable: {kernel().reason}")
    if q.dtype != torch.int8 or weight.dtype != torch.int8 or scales.dtype != torch.float32:
        raise ValueError("the VNNI kernel multiplies int8 activations and weights, with float32 scales")
    if q.device.type != "cpu" or weight.device.type != "cpu" or scales.device.type != "cpu":
        raise ValueError("the VNNI kernel runs on the CPU")
    rows, depth = q.shape
    if weight.shape[1] != depth or scales.shape != (rows, -(-depth // group)):
        raise ValueError(f"shapes {tuple(q.shape)}, {tuple(scales.shape)} and {tuple(weight.shape)} do not match "
                         f"groups of {group} terms")
    if group % 4 or not 0 < group <= MAX_GROUP:
        raise ValueError(f"the VNNI kernel takes groups of a multiple of 4 terms, at most {MAX_GROUP}; got {group}")
    q = q if q.stride(1) == 1 else q.contiguous()
    weight = weight if weight.stride(1) == 1 else weight.contiguous()
    scales = scales if scales.stride(1) == 1 else scales.contiguous()
    out = torch.empty((rows, weight.shape[0]), dtype=torch.float32)
    if rows and weight.shape[0]:
        function(q.data_ptr(), q.stride(0), scales.data_ptr(), scales.stride(0), rows, depth, group,
                 weight.data_ptr(), weight.stride(0), out.data_ptr(), out.stride(0), weight.shape[0],
                 torch.get_num_threads())
    return out
