"""int8 codes and scales of activations through the engine's own kernel (``kernels/quantize_groups.c``), built once
per machine: one pass over each row instead of torch's several, and the same bits (every step is one IEEE operation
or exact, so the kernel's values are torch's; ``tests/judge_engine/test_int8_activations.py`` holds them to that).

``quantize`` returns None where the kernel does not serve (no AVX2, no C compiler, not float32 on the CPU, a value
that is not finite): the caller then quantizes in torch operations.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return c_kernels.load("quantize_groups.c", "quantize_groups",
                          [pointer, i64, i64, i64, i64, pointer, i64, pointer, i64], restype=ctypes.c_int)


def quantize(x: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(int8 codes [M, K], float32 scales [M, ceil(K / group)]) of float32 ``x [M, K]``: per ``group`` consecutive
    values of a row (the last group may be shorter), ``scale = max |x| / 127`` and ``code = round(x * ((1 /
    max(max |x|, 1e-30)) * 127))`` (each operation one rounding, as torch computes ``127 / amax``), halves to even;
    None where the kernel does not serve."""
    if not (x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 2 and group > 0
            and kernel().function is not None):
        return None
    if x.stride(1) != 1:
        x = x.contiguous()
    rows, depth = x.shape
    codes = torch.empty((rows, depth), dtype=torch.int8)
    scales = torch.empty((rows, -(-depth // group)), dtype=torch.float32)
    if rows and depth and kernel().function(x.data_ptr(), x.stride(0), rows, depth, group, codes.data_ptr(),
                                            codes.stride(0), scales.data_ptr(), scales.stride(0)) != 0:
        return None
    return codes, scales
