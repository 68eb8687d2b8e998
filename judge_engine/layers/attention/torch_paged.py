"""Reference paged attention in plain torch (the CPU path, and the oracle for the Triton kernels).

Batch invariance matters: the engine promises that a token's result does not depend on what else is in
the batch, nor on whether its prompt came whole, behind a cached prefix, or one token at a time. So a
query's computation depends only on its own position ``p`` and the keys, never on the other queries:

- keys are cut into fixed segments of SEGMENT positions; query ``p`` reads the keys before its own
  segment, ``[0, s)`` with ``s = SEGMENT * (p // SEGMENT)``, in one unmasked call, and its own segment
  ``[s, s + SEGMENT)`` in one call with an explicit causal mask (keys past the context are masked);
- the two partial results are merged with their log-sum-exps, elementwise, with the transcendental
  functions padded so every element takes the same SIMD code (judge_engine/layers/elementwise.py).

Each call goes through the engine's own kernel (row_attention.py: every query row by itself, in a fixed order of
IEEE operations, so the same bits on every CPU with AVX2 and FMA) where it serves the call, else through torch's
flash attention, whose layout the rest of this paragraph is about. torch's CPU flash-attention kernel cuts each
(batch, head) slice of queries into blocks of 32 rows when a call has fewer than 192 queries, and multiplies each
block by the keys with one matrix product. Every call here has a whole number of QUERY_TILE = 32 queries per slice (padded), at most 160, so every block is a full 32-row product:
a query's scores and weighted values are summed in the same order whatever the other rows of its tile are
(the premise of judge_engine/layers/row_tiles.py, checked by tests/judge_engine/test_row_tiles.py). Keys
are read in blocks of at most 512 whose sizes depend only on the number of keys, which the query's position
fixes. So queries are batched freely as long as each one sees exactly its own keys:

- the "before" calls are grouped across sequences: the queries of every sequence that reads the same
  cached blocks for ``[0, s)`` (the criteria of one trajectory behind their shared prefix) go into one
  call, so those keys are gathered and read once per step and layer instead of once per sequence;
- the "own segment" calls of all sequences are one batched call per size class (pieces padded to a few
  rows more), with a mask per piece.

The grouping is planned once per step (it is the same in every layer) and kept in the metadata.

Sliding windows (a query at ``p`` sees keys ``p - window + 1 .. p``) keep the rule: the own-segment mask also
blocks the keys left of the window, and the "before" call of query ``p`` reads keys ``[lo, s)`` where ``lo`` is
the window's start rounded down to a segment, with a mask only when the window starts inside that segment; so
the keys and mask of a query still depend on ``p`` alone, and a query whose window reaches key 0 takes exactly
the unwindowed path. Soft-capped scores (``softcap * tanh(score / softcap)``, Gemma 2) are not something torch's
flash kernel computes: those calls multiply, cap and normalise explicitly, every product of the same fixed
32-row shape (the premise above), and return the same log-sum-exp for the merge.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from judge_engine.layers.attention import row_attention
from judge_engine.layers.attention.metadata import AttentionMetadata
from judge_engine.layers.elementwise import apply_blockwise

# Keys per segment. Query p computes at most SEGMENT - 1 masked keys of its own segment; a smaller
# segment wastes less but makes more (and smaller) kernel calls. Rounded up to a multiple of the block size.
SEGMENT = 128
# torch's kernel works in blocks of 32 query rows when a (batch, head) slice has fewer than 192: every slice here
# has a whole number of such tiles, at most CALL_TILES of them.
QUERY_TILE = 32
CALL_TILES = 5
CALL_ROWS = QUERY_TILE * CALL_TILES
# Own-segment pieces are padded to a multiple of this many query positions (small ones to a power of two, so a
# decode step's one-token pieces stay one row), so that pieces of similar size share one batched call while the
# padding stays a few rows per piece.
ROW_QUANTUM = 8


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write new keys/values ``[T, Hkv, D]`` into caches ``[num_blocks, block_size, Hkv, D]``; slot -1 is skipped."""
    keep = slot_mapping >= 0
    slots = slot_mapping
    if not bool(keep.all()):
        slots = slot_mapping[keep]
        k, v = k[keep], v[keep]
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slots, k.to(k_cache.dtype))
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slots, v.to(v_cache.dtype))


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
    window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Causal attention of ``q [T, Hq, D]`` over each sequence's cached keys; returns ``[T, Hq, D]``.

    Query ``i`` of a sequence with ``n`` queries and ``L`` context keys sits at position ``L - n + i``
    (causal mask aligned bottom-right), so a cached prefix is attended in full. Rows past the last
    sequence (padding) are zero. ``window``: the query at ``p`` sees only keys ``p - window + 1 .. p``
    (transformers' ``sliding_window``); block-table entries of blocks entirely left of every query's window may
    be -1 (freed). ``softcap``: scores become ``softcap * tanh(score / softcap)`` before the softmax.
    """
    if q.device.type != "cpu":
        return _attend_each_sequence(q, k_cache, v_cache, meta, scale, window, softcap)
    num_tokens, num_q_heads, head_dim = q.shape
    heads = _Heads(num_q_heads, k_cache.shape[2], head_dim)
    plan = _step_plan(meta, k_cache.shape[1], heads, q.dtype, window)
    # every (token, query head) pair is one row of head_dim values; the plan addresses these head rows
    rows = q.contiguous().view(-1, head_dim)
    out = torch.empty((num_tokens * num_q_heads, head_dim), dtype=q.dtype)
    out[plan.padding_start:].zero_()
    lse = torch.empty(num_tokens * num_q_heads, dtype=torch.float32)
    for piece_class in plan.own_segments:
        _attend_own_segments(rows, k_cache, v_cache, piece_class, heads, scale, softcap, plan.tiling, out, lse)
    for group in plan.before_groups:
        _attend_before(rows, k_cache, v_cache, group, heads, scale, softcap, plan.tiling, out, lse)
    return out.view(q.shape)


@dataclass(frozen=True)
class _Tiling:
    """How a call's query rows are laid out: for torch's flash kernel, each slice padded to whole QUERY_TILE tiles, at
    most CALL_ROWS rows (the rule above); for the engine's kernel (row_attention.py), which computes each row by
    itself, no padding and slices of any size (``call_rows`` None)."""

    query_tile: int
    call_rows: int | None

    def tiled(self, rows: int) -> int:
        return -(-rows // self.query_tile) * self.query_tile

    def in_calls(self, rows: int) -> int:
        """Rows padded so that they split into slices of one size: whole query tiles up to ``call_rows``, else whole
        ``call_rows`` slices (a group's slices then share one call, as its batch)."""
        if self.call_rows is None or rows <= self.call_rows:
            return self.tiled(rows)
        return -(-rows // self.call_rows) * self.call_rows

    def slice_rows(self, rows: int) -> int:
        """The rows of each slice of a group whose ``rows`` are already padded by ``in_calls``."""
        return rows if self.call_rows is None else min(rows, self.call_rows)


FLASH_TILING = _Tiling(QUERY_TILE, CALL_ROWS)
ROW_TILING = _Tiling(1, None)


@dataclass(frozen=True)
class _Heads:
    num_q_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def group(self) -> int:
        """Query heads per KV head: query head ``h`` reads KV head ``h // group``, as in transformers."""
        return self.num_q_heads // self.num_kv_heads

    def call_rows(self, tokens: torch.Tensor) -> torch.Tensor:
        """Head rows of ``tokens [..., n]`` in the order a call folds them: ``[..., Hkv, group, n]``.

        The query heads that share a KV head are folded into the query axis (rows ordered head in group,
        then position), so each KV head's keys and values are read once (measured ~20% faster than
        broadcasting them over the group).
        """
        heads = torch.arange(self.num_q_heads).view(self.num_kv_heads, self.group, 1)
        return tokens.unsqueeze(-2).unsqueeze(-2) * self.num_q_heads + heads


@dataclass
class _PieceClass:
    """Own-segment pieces padded to the same number of query positions, attended in one batched call."""

    positions: int            # query positions per piece, padded (_padded_positions)
    segment: int
    query_rows: torch.Tensor  # int64 [P * Hkv * R]: head rows in call order, R = group * positions in whole query
                              # tiles (padding repeats one)
    blocks: torch.Tensor      # int64 [P * segment / block_size]: the cache blocks of each piece's segment
    mask: torch.Tensor        # [P, 1, R, segment]: additive causal mask
    real: torch.Tensor | None  # int64: which call rows are real (None when all are)
    out_rows: torch.Tensor    # int64: the head rows that the real call rows go to


@dataclass
class _BeforeGroup:
    """Queries of one or more sequences that all read the same cached blocks for keys ``[lo, lo + keys)`` (``lo``
    is 0 without a sliding window)."""

    keys: int
    blocks: torch.Tensor      # int64 [keys / block_size]
    first_block: int | None   # when the blocks are consecutive in the cache: read in place, without a copy
    query_rows: torch.Tensor  # int64 [Hkv * R]: head rows in call order, R = group * tokens in whole query tiles
    real_rows: int            # the first real_rows of each KV head's R rows are real (the rest repeat one)
    out_rows: torch.Tensor    # int64 [Hkv * real_rows]: the head rows of the real call rows
    mask: torch.Tensor | None = None  # [tiles, 1, slice rows, keys]: keys left of each row's window


@dataclass
class _StepPlan:
    own_segments: list[_PieceClass]
    before_groups: list[_BeforeGroup]
    padding_start: int  # head rows from here on belong to padding tokens
    tiling: _Tiling


def _step_plan(meta: AttentionMetadata, block_size: int, heads: _Heads, dtype: torch.dtype,
               window: int | None = None) -> _StepPlan:
    # keyed on the tensors themselves too, so metadata whose fields were replaced gets a fresh plan
    key = ("torch_paged", SEGMENT, block_size, heads, dtype, id(meta.cu_seqlens_q), id(meta.context_lens),
           id(meta.block_tables), window)
    plan = meta.backend_cache.get(key)
    if plan is None:
        plan = _build_plan(meta, block_size, heads, dtype, window)
        # plans of other metadata are stale; those of other windows are the other layers' (Gemma 2 alternates)
        for stale in [k for k in meta.backend_cache if k[:-1] != key[:-1]]:
            del meta.backend_cache[stale]
        meta.backend_cache[key] = plan
    return plan


def _build_plan(meta: AttentionMetadata, block_size: int, heads: _Heads, dtype: torch.dtype,
                window: int | None = None) -> _StepPlan:
    """Cut every sequence's queries at segment boundaries into pieces; class the pieces by padded size for
    the own-segment calls, and group them by the blocks they read before their segment."""
    segment = block_size * -(-SEGMENT // block_size)
    blocks_per_segment = segment // block_size
    tiling = ROW_TILING if row_attention.serves_calls(dtype, heads.head_dim) else FLASH_TILING
    starts = meta.cu_seqlens_q.tolist()
    tables = meta.block_tables.numpy().astype(np.int64)
    width = tables.shape[1]
    pieces: dict[int, list[tuple[int, int, int, int, np.ndarray]]] = {}
    before: dict[tuple, tuple[np.ndarray, list[tuple[int, int, int]]]] = {}
    for b, context_len in enumerate(meta.context_lens.tolist()):
        num_queries = starts[b + 1] - starts[b]
        first = context_len - num_queries
        position = first
        while position < context_len:
            seg_start = position - position % segment
            count = min(seg_start + segment, context_len) - position
            token = starts[b] + position - first
            first_block = seg_start // block_size
            own = np.zeros(blocks_per_segment, dtype=np.int64)  # past the table: block 0, masked
            present = tables[b, first_block:min(first_block + blocks_per_segment, width)]
            own[:present.shape[0]] = present
            own[own < 0] = 0
            pieces.setdefault(_padded_positions(count), []).append((token, count, position, seg_start, own))
            for run_position, run_count, lo, masked in _before_runs(position, count, seg_start, segment, window):
                prefix = tables[b, lo // block_size:first_block]
                if window is not None:
                    prefix = np.where(prefix < 0, 0, prefix)  # a freed block is left of the window: masked
                entry = before.setdefault((lo, seg_start, masked, prefix.tobytes()), (prefix, []))
                entry[1].append((token + run_position - position, run_count, run_position))
            position += count
    return _StepPlan(
        own_segments=[_piece_class(padded, items, segment, heads, dtype, tiling, window)
                      for padded, items in sorted(pieces.items())],
        before_groups=[_before_group(lo, seg_start - lo, prefix, runs, heads, dtype, tiling,
                                     window if masked else None)
                       for (lo, seg_start, masked, _), (prefix, runs) in before.items()],
        padding_start=starts[-1] * heads.num_q_heads,
        tiling=tiling,
    )


def _before_runs(position: int, count: int, seg_start: int, segment: int, window: int | None):
    """The queries at ``position .. position + count - 1`` (all in the segment at ``seg_start``) that read keys
    before it, as runs ``(first position, count, lo, masked)``: each reads keys ``[lo, seg_start)``, masked when
    its window starts past ``lo``. Without a window one run reads from key 0, unmasked."""
    if seg_start == 0:
        return []
    if window is None:
        return [(position, count, 0, False)]
    runs: list[tuple[int, int, int, bool]] = []
    for p in range(position, position + count):
        first_key = max(0, p - window + 1)
        lo = first_key - first_key % segment
        if lo >= seg_start:
            continue  # the window lies inside the query's own segment
        masked = first_key > lo
        if runs and runs[-1][2:] == (lo, masked) and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, lo, masked)
        else:
            runs.append((p, 1, lo, masked))
    return runs


def _padded_positions(count: int) -> int:
    if count > ROW_QUANTUM:
        return -(-count // ROW_QUANTUM) * ROW_QUANTUM
    return 1 << (count - 1).bit_length()


def _padded_with_first(call_rows: torch.Tensor, total: int) -> torch.Tensor:
    """``call_rows [..., R]`` padded to ``total`` along the last axis by repeating each slice's first row (a real
    query, so the padding rows compute something finite; their results are dropped)."""
    extra = total - call_rows.shape[-1]
    return torch.cat([call_rows, call_rows[..., :1].expand(*call_rows.shape[:-1], extra)], dim=-1)


def _before_group(lo: int, keys: int, prefix: np.ndarray, runs: list[tuple[int, int, int]], heads: _Heads,
                  dtype: torch.dtype, tiling: _Tiling, window: int | None) -> _BeforeGroup:
    """``runs``: (first token, count, first position) of each run of queries; ``window`` only when masked."""
    tokens = torch.tensor([t for first, n, _ in runs for t in range(first, first + n)], dtype=torch.int64)
    first = int(prefix[0])
    consecutive = bool((prefix == np.arange(first, first + prefix.shape[0])).all())
    call_rows = heads.call_rows(tokens).reshape(heads.num_kv_heads, -1)
    real_rows = call_rows.shape[1]
    padded_rows = tiling.in_calls(real_rows)
    mask = None
    if window is not None:
        # a KV head's call rows are (query head in group, token), token fastest
        positions = torch.tensor([p for _, n, start in runs for p in range(start, start + n)]).repeat(heads.group)
        positions = _padded_with_first(positions, padded_rows).view(-1, tiling.slice_rows(padded_rows))
        blocked = (lo + torch.arange(keys))[None, None, :] <= (positions - window)[:, :, None]
        mask = torch.zeros(blocked.shape, dtype=dtype).masked_fill_(blocked, float("-inf")).unsqueeze(1)
    return _BeforeGroup(keys, torch.from_numpy(prefix.copy()), first if consecutive else None,
                        _padded_with_first(call_rows, padded_rows).reshape(-1), real_rows,
                        call_rows.reshape(-1), mask)


def _piece_class(positions: int, items, segment: int, heads: _Heads, dtype: torch.dtype, tiling: _Tiling,
                 window: int | None = None) -> _PieceClass:
    num_pieces = len(items)
    first_tokens, counts, first_positions, seg_starts = (
        torch.tensor([item[field] for item in items], dtype=torch.int64) for field in range(4))
    offsets = torch.arange(positions)
    real = offsets[None, :] < counts[:, None]  # [P, positions]
    tokens = first_tokens[:, None] + torch.where(real, offsets[None, :], 0)
    query_pos = first_positions[:, None] + offsets[None, :]
    key_pos = seg_starts[:, None] + torch.arange(segment)[None, :]
    blocked = key_pos[:, None, :] > query_pos[:, :, None]
    if window is not None:
        blocked |= key_pos[:, None, :] <= query_pos[:, :, None] - window
    blocked &= real[:, :, None]  # padding rows: nothing blocked
    mask = torch.zeros(blocked.shape, dtype=dtype).masked_fill_(blocked, float("-inf"))
    group = heads.group
    slice_rows = group * positions
    extra = tiling.tiled(slice_rows) - slice_rows  # padding rows: the slice's first query again, with nothing masked
    mask = mask[:, None].expand(num_pieces, group, positions, segment).reshape(num_pieces, 1, slice_rows, segment)
    mask = F.pad(mask, (0, 0, 0, extra))
    call_rows = heads.call_rows(tokens).reshape(num_pieces, heads.num_kv_heads, slice_rows)
    call_rows = _padded_with_first(call_rows, slice_rows + extra).reshape(-1)
    real_rows = real[:, None, None, :].expand(num_pieces, heads.num_kv_heads, group, positions)
    real_rows = F.pad(real_rows.reshape(num_pieces, heads.num_kv_heads, slice_rows), (0, extra)).reshape(-1)
    all_real = bool(real_rows.all())
    return _PieceClass(
        positions=positions,
        segment=segment,
        query_rows=call_rows,
        blocks=torch.from_numpy(np.concatenate([item[4] for item in items])),
        mask=mask,
        real=None if all_real else real_rows.nonzero().squeeze(1),
        out_rows=call_rows if all_real else call_rows[real_rows],
    )


def _attend_own_segments(rows, k_cache, v_cache, pieces: _PieceClass, heads: _Heads, scale: float,
                         softcap: float | None, tiling: _Tiling, out: torch.Tensor, lse: torch.Tensor) -> None:
    """Masked attention of each piece's queries over its own segment; writes ``out`` and ``lse``."""
    num_pieces = pieces.mask.shape[0]
    kv_heads, head_dim = heads.num_kv_heads, heads.head_dim
    queries = rows.index_select(0, pieces.query_rows).view(num_pieces, kv_heads, -1, head_dim)
    keys = _gather_blocks(k_cache, pieces.blocks, "own_k").view(num_pieces, pieces.segment, kv_heads, head_dim)
    values = _gather_blocks(v_cache, pieces.blocks, "own_v").view(num_pieces, pieces.segment, kv_heads, head_dim)
    keys, values = keys.permute(0, 2, 1, 3), values.permute(0, 2, 1, 3)
    result = torch.empty_like(queries)
    result_lse = torch.empty(queries.shape[:-1], dtype=torch.float32)
    step = tiling.slice_rows(queries.shape[2])
    for start in range(0, queries.shape[2], step):  # a piece's slices differ in keys: one call per slice of rows
        tiles = slice(start, start + step)
        result[:, :, tiles], result_lse[:, :, tiles] = _attend(queries[:, :, tiles], keys, values, scale,
                                                               pieces.mask[:, :, tiles], softcap, tiling)
    result, result_lse = result.view(-1, head_dim), result_lse.view(-1)
    if pieces.real is not None:
        result, result_lse = result.index_select(0, pieces.real), result_lse.index_select(0, pieces.real)
    out.index_copy_(0, pieces.out_rows, result)
    lse.index_copy_(0, pieces.out_rows, result_lse)


def _attend_before(rows, k_cache, v_cache, before: _BeforeGroup, heads: _Heads, scale: float,
                   softcap: float | None, tiling: _Tiling, out: torch.Tensor, lse: torch.Tensor) -> None:
    """Attention of the group's queries over the keys before their segment (unmasked unless a sliding window
    starts inside them), merged into what ``out`` and ``lse`` hold for them (their own segment)."""
    kv_heads, head_dim = heads.num_kv_heads, heads.head_dim
    # the slices of every KV head's rows become the call's batch, all reading the same keys (a stride-0 view)
    num_rows = before.query_rows.shape[0] // kv_heads
    slice_rows = tiling.slice_rows(num_rows)
    queries = rows.index_select(0, before.query_rows).view(kv_heads, -1, slice_rows, head_dim).transpose(0, 1)
    num_tiles = queries.shape[0]
    if before.first_block is not None:
        blocks = slice(before.first_block, before.first_block + before.blocks.shape[0])
        keys, values = k_cache[blocks], v_cache[blocks]
    else:
        keys = _gather_blocks(k_cache, before.blocks, "k")
        values = _gather_blocks(v_cache, before.blocks, "v")
    keys = keys.view(1, before.keys, kv_heads, head_dim).permute(0, 2, 1, 3).expand(num_tiles, -1, -1, -1)
    values = values.view(1, before.keys, kv_heads, head_dim).permute(0, 2, 1, 3).expand(num_tiles, -1, -1, -1)
    result, result_lse = _attend(queries, keys, values, scale, before.mask, softcap, tiling)
    # back to call order [Hkv, R], then the real rows of each KV head
    result = result.transpose(0, 1).reshape(kv_heads, -1, head_dim)[:, :before.real_rows].reshape(-1, head_dim)
    result_lse = result_lse.transpose(0, 1).reshape(kv_heads, -1)[:, :before.real_rows].reshape(-1)
    merged = _merge(result, result_lse, out.index_select(0, before.out_rows), lse.index_select(0, before.out_rows))
    out.index_copy_(0, before.out_rows, merged)


def _gather_blocks(cache: torch.Tensor, blocks: torch.Tensor, slot: str) -> torch.Tensor:
    """The listed cache blocks ``[n, block_size, Hkv, D]``, copied into a reusable buffer."""
    shape = (blocks.shape[0], *cache.shape[1:])
    return torch.index_select(cache, 0, blocks, out=_workspace(slot, shape, cache))


_workspaces = threading.local()
MAX_WORKSPACE_ELEMENTS = 1 << 26  # 256 MiB of float32 per buffer


def _workspace(slot: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A reusable CPU buffer for gathered keys or values.

    On the CPU, fresh allocations of megabytes come from the kernel as untouched pages, and faulting
    them in costs more than the copy itself (CUDA's caching allocator already reuses memory). Per
    thread, so that engines running in different threads never share one; gathers too large to keep
    around are allocated afresh.
    """
    numel = math.prod(shape)
    if like.device.type != "cpu" or numel > MAX_WORKSPACE_ELEMENTS:
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    buffers = _workspaces.__dict__.setdefault("buffers", {})
    # a buffer made under inference_mode is an inference tensor, which may not be written outside it
    key = (slot, like.dtype, torch.is_inference_mode_enabled())
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < numel:
        buffer = torch.empty(numel, dtype=like.dtype)
        buffers[key] = buffer
    return buffer[:numel].view(shape)


def _flash(q, k, v, scale: float, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's CPU flash attention: ``[B, H, Lq, D]`` outputs and their float32 log-sum-exps ``[B, H, Lq]``."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, attn_mask=mask,
                                                                           scale=scale)
    return out, lse


def _attend(q, k, v, scale: float, mask: torch.Tensor | None, softcap: float | None,
            tiling: _Tiling = FLASH_TILING) -> tuple[torch.Tensor, torch.Tensor]:
    if tiling is ROW_TILING:   # the plan chose the engine's kernel: its rows are not padded for torch's
        return row_attention.attend(q, k, v, scale, mask, softcap)
    if softcap is None:
        return _flash(q, k, v, scale, mask)
    return _softcapped(q, k, v, scale, mask, softcap)


def _softcapped(q, k, v, scale: float, mask: torch.Tensor | None,
                softcap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``_flash`` with soft-capped scores, computed explicitly in float32 in the order transformers does
    (scale, divide by the cap, tanh, multiply). ``q [B, H, L, D]`` has whole 32-row query tiles and every
    product runs per tile, so a row's scores and weighted values do not depend on the other rows."""
    batch, num_heads, num_rows, head_dim = q.shape
    tiles = num_rows // QUERY_TILE
    queries = q.float().reshape(batch, num_heads, tiles, QUERY_TILE, head_dim)
    scores = torch.matmul(queries, k.float().unsqueeze(2).transpose(-1, -2)).mul_(scale).div_(softcap)
    scores = apply_blockwise(torch.tanh, scores).mul_(softcap)
    if mask is not None:
        scores.add_(mask.float().reshape(mask.shape[0], mask.shape[1], tiles, QUERY_TILE, -1))
    top = scores.amax(-1, keepdim=True)
    weights = apply_blockwise(torch.exp, scores.sub_(top))
    total = weights.sum(-1, keepdim=True)
    out = torch.matmul(weights, v.float().unsqueeze(2)).div_(total)
    lse = top.add_(apply_blockwise(torch.log, total))
    return out.reshape(q.shape).to(q.dtype), lse.reshape(batch, num_heads, num_rows)


def _merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor) -> torch.Tensor:
    """Attention over the union of two disjoint key sets, from each set's output and log-sum-exp.

    Only exact IEEE operations (mul, add) and padded transcendentals, so an element's result never
    depends on the tensor's size.
    """
    weight_a = apply_blockwise(torch.sigmoid, lse_a - lse_b).unsqueeze(-1)
    weight_b = apply_blockwise(torch.sigmoid, lse_b - lse_a).unsqueeze(-1)
    if out_a.dtype == torch.float32:  # both are fresh buffers: merge in place, one pass fewer
        return out_a.mul_(weight_a).add_(out_b.mul_(weight_b))
    merged = out_a.float() * weight_a + out_b.float() * weight_b
    return merged.to(out_a.dtype)


def _attend_each_sequence(q, k_cache, v_cache, meta: AttentionMetadata, scale: float, window: int | None = None,
                          softcap: float | None = None) -> torch.Tensor:
    """The same attention on other devices (the torch backend forced on CUDA): per sequence, one SDPA call
    with an explicit bottom-right causal mask (soft-capped scores computed explicitly)."""
    out = torch.zeros_like(q)
    starts = meta.cu_seqlens_q.tolist()
    tables = meta.block_tables.long()
    num_kv_heads, head_dim = k_cache.shape[2], q.shape[-1]
    group = q.shape[1] // num_kv_heads
    block_size = k_cache.shape[1]
    for b, context_len in enumerate(meta.context_lens.tolist()):
        start, end = starts[b], starts[b + 1]
        if end == start:
            continue
        blocks = tables[b, :-(-context_len // block_size)]
        if window is not None:
            blocks = blocks.clamp(min=0)  # freed blocks (-1) lie left of every window: read, then masked
        keys = k_cache.index_select(0, blocks).view(-1, num_kv_heads, head_dim)[:context_len]
        values = v_cache.index_select(0, blocks).view(-1, num_kv_heads, head_dim)[:context_len]
        queries = q[start:end].view(end - start, num_kv_heads, group, head_dim).permute(2, 1, 0, 3)
        keys = keys.permute(1, 0, 2).unsqueeze(0).expand(group, -1, -1, -1)
        values = values.permute(1, 0, 2).unsqueeze(0).expand(group, -1, -1, -1)
        query_pos = torch.arange(context_len - (end - start), context_len, device=q.device)
        key_pos = torch.arange(context_len, device=q.device)
        mask = key_pos[None, :] <= query_pos[:, None]
        if window is not None:
            mask &= key_pos[None, :] > query_pos[:, None] - window
        if softcap is None:
            result = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale)
        else:
            scores = torch.tanh(torch.matmul(queries.float(), keys.float().transpose(-1, -2)) * scale / softcap)
            scores = (scores * softcap).masked_fill(~mask, float("-inf"))
            result = torch.matmul(scores.softmax(-1), values.float()).to(q.dtype)
        out[start:end] = result.permute(2, 1, 0, 3).reshape(end - start, -1, head_dim)
    return out
