"""A linear map's weight kept in a GGUF's own block format, dequantized a column chunk at a time as it is multiplied.

A GGUF block format stores a row of the weight as groups of ``group`` values, each value ``code * scale (+
offset)`` with small integer codes and one float32 scale (and offset) per group; llama.cpp's converter and gguf-py
dequantize exactly so. ``BlockRows`` holds those codes (4-bit ones two to a byte), scales and offsets; it rebuilds
any rows of the float32 weight with the same two float operations, in the same order, that gguf-py's dequantize
uses (the product ``code * scale`` is exact in every format read here, and the one rounding is the offset's
addition), so a rebuilt row is the float32 conversion's row to the bit.

``BlockWeight`` is one linear map: its row ranges (a merged map's parts may come in different formats). The CPU
products read it as they read a float32 weight: the engine's float32 kernel (layers/float_gemm.py) rebuilds a
panel of its values at a time with the same operations (kernels/block_codes.h), and the torch route
(layers/row_tiles.py) asks it for the same column chunks that it reads of a float32 weight; either way the map's
output is the float32 model's output to the bit, at about the memory of the GGUF file (a 1.5B Q4_K_M model: 1.4 GB
resident against 6.2 GB of float32).
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
from dataclasses import dataclass

import torch
from torch import nn

from judge_engine.layers import c_kernels, row_tiles

KERNEL_ENV = "JUDGE_ENGINE_BLOCK_KERNEL"   # "off": the torch route even where the C kernel builds

_scratch = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A buffer of ``shape`` reused by this thread from one chunk to the next: a fresh allocation of a few MB per
    chunk costs its page faults every time (measured: about half of the rebuilding's cost). One per inference mode:
    a buffer made under inference_mode is an inference tensor, which may not be written outside it."""
    size = math.prod(shape)
    buffers = _scratch.__dict__.setdefault("buffers", {})
    key = (name, torch.is_inference_mode_enabled())
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < size or buffer.dtype != dtype:
        buffer = torch.empty(size, dtype=dtype)
        buffers[key] = buffer
    return buffer[:size].view(shape)


@functools.lru_cache(maxsize=1)
def kernel() -> c_kernels.Kernel:
    """kernels/block_rows.c: the same values as the torch route below, in one pass instead of four or five (a
    decode step rebuilds every weight once per token)."""
    if os.environ.get(KERNEL_ENV, "").strip().lower() == "off":
        return c_kernels.Kernel(None, f"{KERNEL_ENV}=off")
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return c_kernels.load("block_rows.c", "block_rows",
                          [pointer, i64, pointer, pointer, i64, pointer, i64, i64, i64, i64, i64, ctypes.c_int32])


@dataclass
class BlockRows:
    """Rows of a weight in a block format: ``codes`` int8 [rows, columns], or 4-bit codes packed two to a byte
    (uint8 [rows, columns / 2]: in each run of ``2 * half`` values, the first ``half`` in the bytes' low nibbles
    and the next ``half`` in their high nibbles, as the GGUF formats lay them out); ``scale`` and ``offset``
    float32 [rows, columns / group] (offset None: no offset)."""
    codes: torch.Tensor
    scale: torch.Tensor
    offset: torch.Tensor | None
    group: int
    half: int = 0          # 0: one code per byte
    shift: int = 0         # subtracted from each 4-bit code before scaling (Q4_0's codes are 0..15 for -8..7)

    @property
    def rows(self) -> int:
        return self.codes.shape[0]

    @property
    def columns(self) -> int:
        return self.scale.shape[1] * self.group

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.scale, self.offset) if t is not None)

    def kernel_shape(self) -> bool:
        """The C kernels' premise (kernels/block_codes.h): group and half are powers of two of at least 16 (every
        format read here)."""
        return all(n >= 16 and n & (n - 1) == 0 for n in (self.group, self.half or 16))

    def with_rows(self, reorder) -> "BlockRows":
        """The same rows in another order: ``reorder`` applied to the codes, scales and offsets alike."""
        offset = None if self.offset is None else reorder(self.offset)
        return BlockRows(reorder(self.codes), reorder(self.scale), offset, self.group, self.half, self.shift)

    def dequantize(self, start: int, stop: int, out: torch.Tensor) -> None:
        """Rows [start, stop) as float32 into ``out`` [stop - start, columns] (rows contiguous)."""
        count, groups = stop - start, self.scale.shape[1]
        function = kernel().function
        if function is not None and self.codes.device.type == "cpu" and self.kernel_shape():
            codes, scale = self.codes[start:stop], self.scale[start:stop]
            offset = None if self.offset is None else self.offset[start:stop]
            function(codes.data_ptr(), codes.stride(0), scale.data_ptr(), 0 if offset is None else offset.data_ptr(),
                     scale.stride(0), out.data_ptr(), out.stride(0), count, self.columns, self.group, self.half,
                     self.shift)
            return
        values = out.view(count, groups, self.group)
        if self.half:
            packed = self.codes[start:stop].view(count, -1, self.half)
            codes = scratch("codes", (count, packed.shape[1], 2, self.half), torch.uint8)
            torch.bitwise_and(packed, 15, out=codes[:, :, 0])
            torch.bitwise_right_shift(packed, 4, out=codes[:, :, 1])
            if self.shift:   # on the bytes, exact: gguf-py scales q - 8 (a zero keeps the scale's sign)
                codes = codes.view(torch.int8).sub_(self.shift)
            values.copy_(codes.view(count, groups, self.group))
        else:
            values.copy_(self.codes[start:stop].view(count, groups, self.group))
        values.mul_(self.scale[start:stop].unsqueeze(-1))
        if self.offset is not None:
            values.add_(self.offset[start:stop].unsqueeze(-1))


class BlockWeight(nn.Module):
    """A linear map's weight [N, K] as consecutive row ranges (``parts``), each a BlockRows or a float32 tensor (a
    format without a block reader here, held dequantized); ``linear`` (layers/int8_linear.py) multiplies it."""

    def __init__(self, parts: list[BlockRows | torch.Tensor]):
        super().__init__()
        columns = {part.columns if isinstance(part, BlockRows) else part.shape[1] for part in parts}
        if len(columns) != 1:
            raise ValueError(f"block weight: parts of different widths {sorted(columns)}")
        self.parts = parts
        self.starts = [0]
        for part in parts:
            self.starts.append(self.starts[-1] + (part.rows if isinstance(part, BlockRows) else part.shape[0]))
        self.shape = torch.Size((self.starts[-1], columns.pop()))

    def nbytes(self) -> int:
        return sum(p.nbytes() if isinstance(p, BlockRows) else p.numel() * p.element_size() for p in self.parts)

    def rows(self, start: int, stop: int, dtype: torch.dtype = torch.float32, reuse: bool = False) -> torch.Tensor:
        """Rows [start, stop) of the weight, dequantized to float32 (then ``dtype``, rounded once as a float32
        weight converted to ``dtype`` is). ``reuse``: into this thread's scratch buffer, which the next call with
        ``reuse`` overwrites (a product's chunk, used once)."""
        shape = (stop - start, self.shape[1])
        out = scratch("rows", shape, torch.float32) if reuse else torch.empty(shape, dtype=torch.float32)
        for index, part in enumerate(self.parts):
            first, last = max(start, self.starts[index]), min(stop, self.starts[index + 1])
            if first >= last:
                continue
            target = out[first - start:last - start]
            local = first - self.starts[index], last - self.starts[index]
            if isinstance(part, BlockRows):
                part.dequantize(*local, target)
            else:
                target.copy_(part[local[0]:local[1]])
        return out if dtype == torch.float32 else out.to(dtype)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return row_tiles.linear(x, self, bias)
