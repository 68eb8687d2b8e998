"""Tile sizes and matmul precision shared by the attention kernels."""

from __future__ import annotations

import torch

# tl.dot needs every tile dimension to be at least 16. The upper bounds keep a prefill program's tiles
# (queries, keys, values, pipelined in shared memory) under about 100 KB at head_dim 128, which every
# GPU from sm_80 on holds; float32 tiles are twice as large, so they get half the rows.
MIN_TILE = 16
MAX_TILE_16BIT = 64
MAX_TILE_FP32 = 32


def _max_tile(dtype: torch.dtype) -> int:
    return MAX_TILE_FP32 if dtype == torch.float32 else MAX_TILE_16BIT


def dot_tile_size(n: int) -> int:
    """A tile dimension that covers n items (head dims, query heads of a group): the next power of two, at
    least MIN_TILE."""
    return max(_next_power_of_2(n), MIN_TILE)


def key_tile_size(block_size: int, dtype: torch.dtype) -> int:
    """Keys per inner-loop step: one cache block when it fits a tile, else the nearest tile size.

    The kernels look up each key's block on its own, so a tile may span or split cache blocks, and a
    block size that is not a power of two works too.
    """
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    return min(dot_tile_size(block_size), _max_tile(dtype))


def query_tile_size(max_seqlen_q: int, dtype: torch.dtype) -> int:
    """Query rows per prefill program: short prompts get small tiles so few rows are wasted."""
    size = MIN_TILE
    while size < max_seqlen_q and size < _max_tile(dtype):
        size *= 2
    return size


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def dot_precision(dtype: torch.dtype) -> str:
    # float32 runs exist to be compared with the torch path within 2e-3; TF32's 10-bit mantissa would
    # use up that margin, so full precision there, and the tensor-core default for 16-bit inputs.
    return "ieee" if dtype == torch.float32 else "tf32"
