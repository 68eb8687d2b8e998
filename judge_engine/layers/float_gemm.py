"""Float32 products on the CPU through the engine's own kernel (``kernels/float_gemm.c``), built once per machine.

Every output of the kernel is one chain of fused multiply-adds over the terms in order, so a row's result depends
on that row alone, whatever the batch (the engine's batch invariance, without cutting the batch into padded row
tiles), and is the same bits on every CPU that runs the kernel: Intel or AMD, with or without AVX-512, where a
BLAS picks its kernel by CPU. It reads a weight in a GGUF block format itself, a panel at a time, and so makes one
float copy of each part of the weight per product where torch's route rebuilt a chunk and the BLAS then packed it
again for every 32-row tile (about a fifth of a judging step, measured: docs/benchmarks.md).

Where the kernel is unavailable (no AVX2 or FMA, no C compiler), for other dtypes, and with
``JUDGE_ENGINE_FLOAT_GEMM=torch``, products take row_tiles.py's torch route.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from judge_engine.layers import c_kernels

ROUTE_ENV = "JUDGE_ENGINE_FLOAT_GEMM"   # "torch": row tiles through torch even where the kernel builds


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return c_kernels.load("float_gemm.c", "float_gemm",
                          [pointer, i64, i64, i64, pointer, i64, pointer, i64, pointer, pointer, i64, i64, i64,
                           ctypes.c_int32, pointer, pointer, i64, i64, ctypes.c_int], needs=("avx2", "fma"),
                          off_switch=(ROUTE_ENV, "torch"))


def _serves_part(part) -> bool:
    if isinstance(part, torch.Tensor):
        return part.dtype == torch.float32 and part.device.type == "cpu" and part.dim() == 2 and part.stride(1) == 1
    return part.codes.device.type == "cpu" and part.kernel_shape()


def multiplies(dtype: torch.dtype) -> bool:
    """Whether products in ``dtype`` on the CPU go through the kernel here (float32, where it builds)."""
    return dtype == torch.float32 and kernel().function is not None


def serves(x: torch.Tensor, parts: list) -> bool:
    """Whether the kernel multiplies ``x`` by a weight made of ``parts`` (float32 tensors or BlockRows)."""
    return (x.device.type == "cpu" and x.dim() == 2 and all(_serves_part(part) for part in parts)
            and multiplies(x.dtype))


def linear(x: torch.Tensor, parts: list, starts: list[int], bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ W.T + bias`` for the weight W whose rows [starts[i], starts[i + 1]) are ``parts[i]``: float32 tensors or
    block_weight.BlockRows (not imported: block_weight multiplies through row_tiles, which calls this module)."""
    rows, depth = x.shape
    out = torch.empty(rows, starts[-1], dtype=torch.float32)
    if rows == 0 or starts[-1] == 0:
        return out if bias is None else out.add_(bias)
    x = x if x.stride(1) == 1 else x.contiguous()
    bias = None if bias is None else bias.to(torch.float32).contiguous()
    threads = torch.get_num_threads()
    for part, start, stop in zip(parts, starts, starts[1:]):
        if isinstance(part, torch.Tensor):
            weight = (part.data_ptr(), part.stride(0), None, 0, None, None, 0, 0, 0, 0)
        else:
            offset = None if part.offset is None else part.offset.data_ptr()
            weight = (None, 0, part.codes.data_ptr(), part.codes.stride(0), part.scale.data_ptr(), offset,
                      part.scale.stride(0), part.group, part.half, part.shift)
        kernel().function(x.data_ptr(), x.stride(0), rows, depth, *weight,
                          None if bias is None else bias[start:].data_ptr(), out[:, start:].data_ptr(),
                          out.stride(0), stop - start, threads)
    return out
