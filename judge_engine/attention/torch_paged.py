"""Reference paged attention in plain torch (the CPU path, and the oracle for the Triton kernels).

Batch invariance matters: the engine promises that a token's result does not depend on what else is in
the batch, nor on whether its prompt came whole, behind a cached prefix, or one token at a time. So a
query's computation depends only on its own position ``p`` and the keys, never on the other queries:

- keys are cut into fixed segments of SEGMENT positions; query ``p`` reads the keys before its own
  segment, ``[0, s)`` with ``s = SEGMENT * (p // SEGMENT)``, in one unmasked call, and its own segment
  ``[s, s + SEGMENT)`` in one call with an explicit causal mask (keys past the context are masked);
- the two partial results are merged with their log-sum-exps, elementwise, with the transcendental
  functions padded so every element takes the same SIMD code (judge_engine/models/elementwise.py).

torch's CPU flash-attention kernel computes each query row on its own (with MKL_CBWR set, see
judge_engine/__init__.py, the matmul rows do not depend on how many rows there are), so the queries of a
sequence are batched per segment, one pair of calls each. Compared with one masked call over keys padded
to the kernel's 512-key chunk, this skips the keys above each query's segment and builds no large mask.
"""

from __future__ import annotations

import math
import threading

import torch
import torch.nn.functional as F

from judge_engine.attention.metadata import AttentionMetadata
from judge_engine.models.elementwise import apply_blockwise


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
) -> torch.Tensor:
    """Causal attention of ``q [T, Hq, D]`` over each sequence's cached keys; returns ``[T, Hq, D]``.

    Query ``i`` of a sequence with ``n`` queries and ``L`` context keys sits at position ``L - n + i``
    (causal mask aligned bottom-right), so a cached prefix is attended in full. Rows past the last
    sequence (padding) are zero.
    """
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    starts = meta.cu_seqlens_q.tolist()
    tables = meta.block_tables.long()
    num_kv_heads = k_cache.shape[2]
    for b, context_len in enumerate(meta.context_lens.tolist()):
        start, end = starts[b], starts[b + 1]
        if end == start:
            continue
        keys_needed = _segment_end(context_len - 1)  # the last query's segment is read in full
        k = _gather(k_cache, tables[b], keys_needed, "k")  # [keys_needed, Hkv, D]
        v = _gather(v_cache, tables[b], keys_needed, "v")
        rows = out[start:end].view(end - start, num_kv_heads, -1, q.shape[-1]).permute(2, 1, 0, 3)
        _attend_sequence(q[start:end], k, v, context_len, scale, rows)
    out[starts[-1]:].zero_()
    return out


def _gather(cache: torch.Tensor, table: torch.Tensor, length: int, slot: str) -> torch.Tensor:
    """A sequence's first ``length`` key or value positions ``[length, Hkv, D]``, read through its block table.

    Positions past the sequence's own blocks read block 0 (callers mask them); the cache holds finite
    values everywhere (it is allocated zeroed), so a masked key contributes exactly zero.
    """
    block_size = cache.shape[1]
    num_blocks = -(-length // block_size)
    blocks = table[:num_blocks]
    if blocks.shape[0] < num_blocks or bool((blocks < 0).any()):
        blocks = F.pad(blocks, (0, num_blocks - blocks.shape[0]), value=-1).clamp(min=0)
    shape = (num_blocks, *cache.shape[1:])
    gathered = torch.index_select(cache, 0, blocks, out=_workspace(slot, shape, cache))
    return gathered.view(num_blocks * block_size, *cache.shape[2:])[:length]


_workspaces = threading.local()
MAX_WORKSPACE_ELEMENTS = 1 << 26  # 256 MiB of float32 per buffer


def _workspace(slot: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A reusable CPU buffer for the gathered keys or values of one sequence at a time.

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


# Keys per segment. Query p computes at most SEGMENT - 1 masked keys of its own segment; a smaller
# segment wastes less but makes more (and smaller) kernel calls. A multiple of every block size in use.
SEGMENT = 128


def _segment_end(position: int) -> int:
    return (position // SEGMENT + 1) * SEGMENT


def _attend_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, context_len: int, scale: float,
                     out: torch.Tensor) -> None:
    """Bottom-right causal attention of one sequence's ``q [n, Hq, D]`` over its first ``context_len`` keys,
    written to ``out [g, Hkv, n, D]``. ``k, v [>= segment end of the last query, Hkv, D]``.

    GQA (query head ``h`` reads KV head ``h // g``, as in transformers): the ``g = Hq / Hkv`` query heads
    that share a KV head are folded into the query axis, rows ordered (head in group, position), so K/V
    are read once per KV head (measured ~20% faster than broadcasting K/V over a batch of ``g``).
    """
    q_len, num_q_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    group = num_q_heads // num_kv_heads
    queries = q.reshape(q_len, num_kv_heads, group, head_dim).permute(1, 2, 0, 3)  # [Hkv, g, n, D]
    first = context_len - q_len
    if q.device.type != "cpu":
        keys = k[:context_len].permute(1, 0, 2).unsqueeze(0).expand(group, -1, -1, -1)
        values = v[:context_len].permute(1, 0, 2).unsqueeze(0).expand(group, -1, -1, -1)
        out.copy_(_attend_masked(queries.transpose(0, 1), keys, values, first, scale))
        return
    position = first
    while position < context_len:
        seg_start = position - position % SEGMENT
        seg_end = min(seg_start + SEGMENT, context_len)
        rows = seg_end - position
        offset = position - first
        folded = queries[:, :, offset:offset + rows].reshape(1, num_kv_heads, group * rows, head_dim)
        mask = _segment_mask(position, seg_end, seg_start, q.dtype).repeat(1, 1, group, 1)
        own = slice(seg_start, seg_start + SEGMENT)
        result, own_lse = _flash(folded, _per_kv_head(k[own]), _per_kv_head(v[own]), scale, mask)
        if seg_start > 0:
            before, before_lse = _flash(folded, _per_kv_head(k[:seg_start]), _per_kv_head(v[:seg_start]), scale,
                                        None)
            result = _merge(before, before_lse, result, own_lse)
        out[:, :, offset:offset + rows] = result.view(num_kv_heads, group, rows, head_dim).transpose(0, 1)
        position = seg_end


def _per_kv_head(x: torch.Tensor) -> torch.Tensor:
    """``[m, Hkv, D]`` -> ``[1, Hkv, m, D]`` (a view)."""
    return x.permute(1, 0, 2).unsqueeze(0)


def _segment_mask(first_query: int, end_query: int, seg_start: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask ``[1, 1, queries, SEGMENT]``: query p sees the keys of its segment up to p."""
    query_pos = torch.arange(first_query, end_query)
    key_pos = torch.arange(seg_start, seg_start + SEGMENT)
    blocked = key_pos[None, :] > query_pos[:, None]
    mask = torch.zeros(blocked.shape, dtype=dtype).masked_fill_(blocked, float("-inf"))
    return mask[None, None]


def _flash(q, k, v, scale: float, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's CPU flash attention: ``[B, H, Lq, D]`` outputs and their float32 log-sum-exps ``[B, H, Lq]``."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, attn_mask=mask,
                                                                           scale=scale)
    return out, lse


def _merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor) -> torch.Tensor:
    """Attention over the union of two disjoint key sets, from each set's output and log-sum-exp.

    Only exact IEEE operations (mul, add) and padded transcendentals, so an element's result never
    depends on the tensor's size.
    """
    weight_a = apply_blockwise(torch.sigmoid, lse_a - lse_b).unsqueeze(-1)
    weight_b = apply_blockwise(torch.sigmoid, lse_b - lse_a).unsqueeze(-1)
    merged = out_a.float() * weight_a + out_b.float() * weight_b
    return merged.to(out_a.dtype)


def _attend_masked(q, k, v, first_query: int, scale: float) -> torch.Tensor:
    """The same attention on other devices (the torch backend forced on CUDA): one SDPA call with an
    explicit bottom-right causal mask."""
    query_pos = torch.arange(first_query, first_query + q.shape[2], device=q.device)
    mask = torch.arange(k.shape[2], device=q.device)[None, :] <= query_pos[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
