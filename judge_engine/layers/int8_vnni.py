"""int8 products with scales per group of terms, on AVX-512 VNNI: ``kernels/int8_groups_vnni.c``, built once per
machine and loaded.

The kernel computes what int8_linear.grouped_matmul's slices compute (each group's exact integer sums, times the
row's scale for the group, then the output channel's, added group after group), the whole product in one pass:
the groups' sums stay in registers, where the slices write every group's int32 sums out and read them back. It
gives the same bits as the slices (int8_linear probes that before using it, and calls it).

Built once per machine and loaded by layers/c_kernels.py; on a CPU without AVX-512 VNNI, or without a C compiler,
the kernel is unavailable and grouped products take the slices.
"""

from __future__ import annotations

import ctypes
import functools

from judge_engine.layers import c_kernels

ENTRY_POINT = "int8_groups_vnni"


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    return c_kernels.load("int8_groups_vnni.c", ENTRY_POINT, c_kernels.GROUPED_INT8_ARGUMENTS,
                          needs=("avx512f", "avx512bw", "avx512_vnni"), restype=ctypes.c_int)

