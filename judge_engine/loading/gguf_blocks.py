"""Read a GGUF tensor's blocks into codes, scales and offsets (layers/block_weight.py's BlockRows), without
dequantizing it.

One reader per block format, registered in READERS; each mirrors gguf-py's ``dequantize_blocks`` for its format:
the same bit fields become the codes, and the same float32 products (``d * sc``, ``dmin * m``) become the scales
and offsets, so that ``code * scale + offset`` is gguf-py's value to the bit. Where gguf-py subtracts (``d * q -
dm``) the offset is stored negated (IEEE addition of a negated value is the subtraction, signed zeros included);
where it shifts the codes (``d * (q - 8)``), the shift is kept and applied to the codes (folding it into an offset
would turn gguf-py's -0.0 into +0.0 where d is negative). tests/judge_engine/test_gguf_resident.py checks each
reader against gguf-py on random blocks.

A format without a reader here (Q2_K, Q3_K, the IQ formats, F16, ...) returns None: its tensor is held dequantized.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from judge_engine.layers.block_weight import BlockRows

QK_K = 256


def _f16(field: np.ndarray) -> np.ndarray:
    """A block's 2-byte float16 field as float32 [blocks, 1]."""
    return np.ascontiguousarray(field).view(np.float16).astype(np.float32)


def _nibbles_high_bit(qs: np.ndarray, qh: np.ndarray) -> np.ndarray:
    """Q5_0 / Q5_1: 32 codes per block from 16 bytes of nibbles and a 32-bit word of fifth bits."""
    high = np.ascontiguousarray(qh).view(np.uint32).reshape(-1, 1) >> np.arange(32, dtype=np.uint32).reshape(1, 32)
    low = (qs.reshape(-1, 1, 16) >> np.array([0, 4], dtype=np.uint8).reshape(1, 2, 1)) & np.uint8(0x0F)
    return low.reshape(-1, 32) | ((high & np.uint32(1)).astype(np.uint8) << np.uint8(4))


Parts = tuple[np.ndarray, np.ndarray, np.ndarray | None]   # codes, scales, offsets (None: none), per block


def _q8_0(blocks: np.ndarray) -> Parts:
    d, x = blocks[:, :2], blocks[:, 2:]
    return x.view(np.int8), _f16(d), None


def _q4_0(blocks: np.ndarray) -> Parts:
    return blocks[:, 2:], _f16(blocks[:, :2]), None   # codes 0..15, shifted by 8 as they are dequantized


def _q4_1(blocks: np.ndarray) -> Parts:
    return blocks[:, 4:], _f16(blocks[:, :2]), _f16(blocks[:, 2:4])


def _q5_0(blocks: np.ndarray) -> Parts:
    codes = _nibbles_high_bit(blocks[:, 6:], blocks[:, 2:6]).astype(np.int8) - np.int8(16)
    return codes, _f16(blocks[:, :2]), None


def _q5_1(blocks: np.ndarray) -> Parts:
    return _nibbles_high_bit(blocks[:, 8:], blocks[:, 4:8]), _f16(blocks[:, :2]), _f16(blocks[:, 2:4])


def _k_scales(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K / Q5_K: the 8 groups' scales ``d * sc`` and negated offsets ``-(dmin * m)`` of each 256-value block."""
    from gguf.quants import Q4_K

    sc, m = Q4_K.get_scale_min(np.ascontiguousarray(blocks[:, 4:16]))
    return _f16(blocks[:, :2]) * sc.astype(np.float32), -(_f16(blocks[:, 2:4]) * m.astype(np.float32))


def _q4_k(blocks: np.ndarray) -> Parts:
    scale, offset = _k_scales(blocks)
    return blocks[:, 16:], scale, offset


def _q5_k(blocks: np.ndarray) -> Parts:
    scale, offset = _k_scales(blocks)
    qh, qs = blocks[:, 16:48], blocks[:, 48:]
    low = ((qs.reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & np.uint8(0x0F))
    high = (qh.reshape(-1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & np.uint8(1)
    return low.reshape(-1, 8, 32) | (high << np.uint8(4)), scale, offset


def _q6_k(blocks: np.ndarray) -> Parts:
    ql, qh, scales, d = blocks[:, :128], blocks[:, 128:192], blocks[:, 192:208], blocks[:, 208:210]
    scale = _f16(d) * np.ascontiguousarray(scales).view(np.int8).astype(np.float32)
    low = (ql.reshape(-1, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & np.uint8(0x0F)
    high = (qh.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & np.uint8(3)
    codes = (low.reshape(-1, 8, 32) | (high.reshape(-1, 8, 32) << np.uint8(4))).astype(np.int8) - np.int8(32)
    return codes, scale, None


@dataclass(frozen=True)
class BlockFormat:
    values: int        # per block
    nbytes: int        # per block
    group: int         # values per scale
    half: int          # 4-bit codes packed two to a byte, in runs of 2 * half (0: a code per byte)
    read: Callable[[np.ndarray], Parts]   # [blocks, nbytes] uint8 -> that many blocks' codes, scales, offsets
    offsets: bool
    shift: int = 0     # BlockRows.shift


READERS: dict[str, BlockFormat] = {
    "Q8_0": BlockFormat(32, 34, 32, 0, _q8_0, False),
    "Q4_0": BlockFormat(32, 18, 32, 16, _q4_0, False, shift=8),
    "Q4_1": BlockFormat(32, 20, 32, 16, _q4_1, True),
    "Q5_0": BlockFormat(32, 22, 32, 0, _q5_0, False),
    "Q5_1": BlockFormat(32, 24, 32, 0, _q5_1, True),
    "Q4_K": BlockFormat(QK_K, 144, 32, 32, _q4_k, True),
    "Q5_K": BlockFormat(QK_K, 176, 32, 0, _q5_k, True),
    "Q6_K": BlockFormat(QK_K, 210, 16, 0, _q6_k, False),
}
SLAB_BLOCKS = 8192   # blocks read at a time: the readers' temporaries stay a few MB, whatever the tensor


def read_block_rows(path: str, offset: int, format_name: str, rows: int, columns: int) -> BlockRows | None:
    """The tensor of ``rows`` x ``columns`` stored in ``format_name`` at byte ``offset`` of the GGUF at ``path``,
    as BlockRows; None where the format has no reader here. The file is read a slab at a time, not mapped, so its
    pages never count in this process's memory."""
    form = READERS.get(format_name)
    if form is None:
        return None
    count = rows * columns // form.values
    codes = torch.empty(rows, columns // 2 if form.half else columns, dtype=torch.uint8 if form.half else torch.int8)
    scale = torch.empty(rows, columns // form.group, dtype=torch.float32)
    offsets = torch.empty_like(scale) if form.offsets else None
    targets = [t.view(count, -1).numpy() for t in (codes, scale, offsets) if t is not None]
    with open(path, "rb") as file:
        file.seek(offset)
        for start in range(0, count, SLAB_BLOCKS):
            stop = min(start + SLAB_BLOCKS, count)
            blocks = np.fromfile(file, dtype=np.uint8, count=(stop - start) * form.nbytes)
            if blocks.size != (stop - start) * form.nbytes:
                raise ValueError(f"{path}: the file ends inside a {format_name} tensor at byte {offset}")
            for target, values in zip(targets, form.read(blocks.reshape(stop - start, form.nbytes))):
                target[start:stop] = values.reshape(stop - start, -1)
    return BlockRows(codes, scale, offsets, form.group, form.half, form.shift)
