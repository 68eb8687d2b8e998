"""Matrix products whose result for a row never depends on the other rows of the batch (the CPU path).

Float32 products on a CPU with AVX2 and FMA go through the engine's own kernel (layers/float_gemm.py), whose
every output is a fixed chain of fused multiply-adds, so its rows are independent by construction, need no
padding, and are the same bits on every such CPU. The row tiles below are the route for other dtypes (bfloat16),
for CPUs without those instructions or a C compiler, and with ``JUDGE_ENGINE_FLOAT_GEMM=torch``.

A BLAS picks its kernel, its blocking and its split between threads from the matrix shapes, so the order in
which a row's dot products are summed changes with the number of rows in the call: a token's activations
would change in the last bits with the number of other tokens in the step (measured on an AMD EPYC: every
row count from 2 to 300 gave other bits than one row alone). Here every product is cut into tiles of exactly
ROW_TILE rows (the last one padded with zero rows), all multiplied by the same weight in one batched call, so
every row goes through a product of the same shape, the same kernel and the same summation order whatever else
is in the batch. Within one tile a row's outputs are the dot products of that row alone, whatever its place in
the tile, the other rows and the number of tiles (tests/judge_engine/test_row_tiles.py checks exactly that
premise on the machine that runs the tests).

The weight is read in fixed column chunks of COLUMN_CHUNK_BYTES (output features, rounded to a power of two, a
function of the weight's shape alone), each chunk multiplied by every tile before the next: a big model's weight
(55 MB for one gate/up map of a 1.5B model) no longer streams from memory once per tile, while a chunk (about 4
MiB) stays in cache across the tiles. Measured on a 2-core AMD EPYC (Zen 3): a 2048-row step's gate/up product
went from 42 to 94 GFLOP/s, the others from 65-86 to about 100. A chunk's product has a fixed shape too, so a row
still depends on itself alone.

The tile is the trade-off between a prefill step (thousands of rows: 32-row tiles in one batched call cost
about 5-10% over one plain call) and a decode step (a few rows padded to a tile); benchmarks/engine_judge.py
and engine_generate.py measure both end to end. On CUDA products run as they are: the GPU path makes no
bit-exact promise. With int8 linear maps (judge_engine/loading/quantization.py) the integer products are exact whatever
the rows, so only the float products left (the LM head) use tiles, and the flat batch is not padded to them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from judge_engine.layers import float_gemm

ROW_TILE = 32
COLUMN_CHUNK_BYTES = 4 * 2**20


def tiled_rows(count: int) -> int:
    """``count`` rounded up to whole tiles."""
    return -(-count // ROW_TILE) * ROW_TILE


def uses_row_tiles(x: torch.Tensor) -> bool:
    return x.device.type == "cpu"


def linear(x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for ``x [M, K]``; on the CPU through the engine's float32 kernel where it
    serves, else as tiles of ROW_TILE rows in one batched call. ``weight``: a float tensor [N, K], or a block weight
    (layers/block_weight.py) that rebuilds its rows in float: the kernel reads its parts, the tiles ask it for the
    same column chunks as a float weight's slices (``weight.rows(start, stop, dtype)``), each rebuilt just before
    its product."""
    if not uses_row_tiles(x):
        return F.linear(x, _chunk(weight, 0, weight.shape[0], x.dtype, reuse=False), bias)
    parts, starts = weight_parts(weight)
    if float_gemm.serves(x, parts):
        return float_gemm.linear(x, parts, starts, bias)
    return tiled_linear(x, weight, bias)


def tiled_linear(x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``linear`` on the CPU through torch: tiles of ROW_TILE rows in one batched call, the weight in column
    chunks."""
    count = x.shape[0]
    padded = tiled_rows(count)
    if padded != count or not x.is_contiguous():
        x = F.pad(x, (0, 0, 0, padded - count))  # a fresh contiguous buffer; the zero rows are never read
    tiles = x.view(padded // ROW_TILE, ROW_TILE, x.shape[1])
    chunk = column_chunk(weight, x.dtype)
    rows = weight.shape[0]
    if chunk >= rows:
        out = _tiles_times(tiles, _chunk(weight, 0, rows, x.dtype), bias)
    else:
        out = torch.empty(tiles.shape[0], ROW_TILE, rows, dtype=x.dtype, device=x.device)
        for start in range(0, rows, chunk):
            stop = min(start + chunk, rows)
            out[:, :, start:stop] = _tiles_times(tiles, _chunk(weight, start, stop, x.dtype),
                                                 None if bias is None else bias[start:stop])
    out = out.view(padded, weight.shape[0])
    return out if padded == count else out[:count]


def tiles_float_products(dtype: torch.dtype) -> bool:
    """Whether float products in ``dtype`` go through row tiles here: not where the engine's own kernel multiplies
    (float32, layers/float_gemm.py), whose rows are independent whatever their number, so a batch needs no padding."""
    return not float_gemm.multiplies(dtype)


def weight_parts(weight) -> tuple[list, list[int]]:
    """A weight's row ranges: a float tensor is one, a block weight (layers/block_weight.py) has its own."""
    if isinstance(weight, torch.Tensor):
        return [weight], [0, weight.shape[0]]
    return weight.parts, weight.starts


def column_chunk(weight, dtype: torch.dtype) -> int:
    """Output features per product: about COLUMN_CHUNK_BYTES of the weight in ``dtype`` (a float weight's own),
    a power of two (at least 64)."""
    element_size = weight.element_size() if isinstance(weight, torch.Tensor) else dtype.itemsize
    columns = COLUMN_CHUNK_BYTES / (weight.shape[1] * element_size)
    return max(64, 2 ** round(math.log2(max(columns, 1.0))))


def _chunk(weight, start: int, stop: int, dtype: torch.dtype, reuse: bool = True) -> torch.Tensor:
    """Rows [start, stop) of the weight; a rebuilt chunk is used by one product and dropped, so its buffer is
    reused by the next (not for the whole weight of a GPU product)."""
    if isinstance(weight, torch.Tensor):
        return weight if (start, stop) == (0, weight.shape[0]) else weight[start:stop]
    return weight.rows(start, stop, dtype, reuse=reuse)


def _tiles_times(tiles: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    # one batched call over the tiles, every tile against the same weight (a stride-0 view, no copy): each tile is
    # one product of the fixed shape, and the call is one parallel region instead of one per tile
    weights = weight.t().unsqueeze(0).expand(tiles.shape[0], -1, -1)
    return torch.bmm(tiles, weights) if bias is None else torch.baddbmm(bias, tiles, weights)
