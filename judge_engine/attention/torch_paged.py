"""Reference paged attention in plain torch (the CPU path, and the oracle for the Triton kernels).

Batch invariance matters more than speed here: the engine promises that a sequence's output does not
depend on what else is in the batch. Prefill therefore runs one SDPA call per sequence, and decode runs
the same computation for all sequences at once on keys padded with masked slots. Every path uses the
same explicit-mask SDPA call (never ``is_causal``, whose kernel rounds differently), so a token gets the
same result whether its prompt came whole, behind a cached prefix, or one token at a time; with
MKL_CBWR set (see judge_engine/attention/__init__.py) the results agree to the last bit.
"""

from __future__ import annotations

import math
import threading

import torch
import torch.nn.functional as F

from judge_engine.attention.metadata import AttentionMetadata


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
    (causal mask aligned bottom-right), so a cached prefix is attended in full.
    """
    if meta.is_decode:
        return _decode(q, k_cache, v_cache, meta, scale)
    return _prefill(q, k_cache, v_cache, meta, scale)


# torch's CPU attention kernel walks the keys in chunks of this many; a chunk of keys that are all masked
# leaves its running sums exactly unchanged. Padding every sequence's keys to a multiple of it (with
# masked keys) therefore gives a sequence the same chunk layout, and the same bits, whatever the longest
# sequence of its batch.
KEY_CHUNK = 512


def _padded_len(length: int) -> int:
    return -(-length // KEY_CHUNK) * KEY_CHUNK


def _gather(cache: torch.Tensor, tables: torch.Tensor, length: int, slot: str) -> torch.Tensor:
    """Keys or values ``[B, padded length, Hkv, D]`` read through block tables ``[B, >= blocks]``.

    Positions past a sequence's own length hold whatever their block holds (block 0 stands in for
    missing blocks): callers mask them. The cache holds finite values everywhere (it is allocated
    zeroed), so a masked key contributes exactly zero.
    """
    batch, block_size = tables.shape[0], cache.shape[1]
    padded = _padded_len(length)
    num_blocks = -(-padded // block_size)
    blocks = tables[:, :num_blocks].long()
    if blocks.shape[1] < num_blocks:
        blocks = F.pad(blocks, (0, num_blocks - blocks.shape[1]), value=-1)
    # -1 entries (past the end of a sequence) read block 0; the mask hides what they hold.
    shape = (batch * num_blocks, *cache.shape[1:])
    keys = torch.index_select(cache, 0, blocks.clamp(min=0).flatten(), out=_workspace(slot, shape, cache))
    return keys.view(batch, num_blocks * block_size, *cache.shape[2:])[:, :padded]


_workspaces = threading.local()
MAX_WORKSPACE_ELEMENTS = 1 << 26  # 256 MiB of float32 per buffer


def _workspace(slot: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """A reusable CPU buffer for the gathered keys or values of one layer at a time.

    Every step gathers megabytes; on the CPU, fresh allocations of that size come from the kernel as
    untouched pages, and faulting them in costs more than the copy itself (CUDA's caching allocator
    already reuses memory). Per thread, so that engines running in different threads never share one;
    gathers too large to keep around are allocated afresh.
    """
    numel = math.prod(shape)
    if like.device.type != "cpu" or numel > MAX_WORKSPACE_ELEMENTS:
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    buffers = _workspaces.__dict__.setdefault("buffers", {})
    key = (slot, like.dtype)
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < numel:
        buffer = torch.empty(numel, dtype=like.dtype)
        buffers[key] = buffer
    return buffer[:numel].view(shape)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """SDPA over ``q [B, Lq, Hq, D]``, ``k/v [B, Lk, Hkv, D]`` and a boolean ``mask [B, Lq, Lk]``.

    GQA folds the ``g = Hq / Hkv`` query heads that share one KV head into the query axis, so K/V are
    never repeated in memory. Returns ``[B, Lq, Hq, D]``.
    """
    batch, q_len, num_q_heads, head_dim = q.shape
    num_kv_heads = k.shape[2]
    group = num_q_heads // num_kv_heads
    # [B, Lq, Hkv, g, D] -> [B, Hkv, g*Lq, D]: rows ordered (g, Lq)
    q = q.view(batch, q_len, num_kv_heads, group, head_dim).permute(0, 2, 3, 1, 4)
    q = q.reshape(batch, num_kv_heads, group * q_len, head_dim)
    k = k.transpose(1, 2)
    v = v.transpose(1, 2)
    mask = mask.repeat(1, group, 1).unsqueeze(1)  # [B, 1, g*Lq, Lk], rows ordered (g, Lq) like q
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    out = out.view(batch, num_kv_heads, group, q_len, head_dim).permute(0, 3, 1, 2, 4)
    return out.reshape(batch, q_len, num_q_heads, head_dim)


def _prefill(q, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """One SDPA call per sequence, so that no sequence's result depends on the others."""
    out = torch.zeros_like(q)  # rows past the last sequence are padding
    starts = meta.cu_seqlens_q.tolist()
    context_lens = meta.context_lens.tolist()
    for b, context_len in enumerate(context_lens):
        start, end = starts[b], starts[b + 1]
        q_len = end - start
        if q_len == 0:
            continue
        k = _gather(k_cache, meta.block_tables[b : b + 1], context_len, "k")
        v = _gather(v_cache, meta.block_tables[b : b + 1], context_len, "v")
        query_pos = torch.arange(context_len - q_len, context_len, device=q.device)
        key_pos = torch.arange(k.shape[1], device=q.device)
        mask = (key_pos[None, :] <= query_pos[:, None]).unsqueeze(0)  # also hides the padding keys
        out[start:end] = _attend(q[start:end].unsqueeze(0), k, v, mask, scale)[0]
    return out


def _decode(q, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """One query per sequence: gather every sequence's keys into one padded batch, then one SDPA call."""
    batch = meta.context_lens.shape[0]
    k = _gather(k_cache, meta.block_tables, meta.max_context_len, "k")  # [B, padded max len, Hkv, D]
    v = _gather(v_cache, meta.block_tables, meta.max_context_len, "v")
    key_pos = torch.arange(k.shape[1], device=q.device)
    mask = (key_pos[None, :] < meta.context_lens[:, None].to(key_pos.device)).unsqueeze(1)  # [B, 1, keys]
    out = _attend(q[:batch].unsqueeze(1), k, v, mask, scale).squeeze(1)
    if q.shape[0] == batch:
        return out
    return torch.cat([out, q.new_zeros(q.shape[0] - batch, *q.shape[1:])])  # padding rows
