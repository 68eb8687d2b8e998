"""Reference paged attention in plain torch (the CPU path, and the oracle for the Triton kernels).

Each sequence is attended on its own, so that its result never depends on what else is in the batch, and
no mask is ever built: a query sees every key of the cached prefix (an unmasked call), and the new
tokens see each other causally (an ``is_causal`` call, whose CPU kernel skips the key blocks above the
diagonal). The two partial results are merged with their log-sum-exps. A single query (decode, or a
one-token prefill) sees all its keys in one unmasked call, so decode and a one-token prefill agree to
the last bit. A prompt computed whole and the same prompt behind a cached prefix split the keys at a
different point, so they agree to rounding (about 1e-7 relative in float32), not to the last bit.
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
    (causal mask aligned bottom-right), so a cached prefix is attended in full. Rows past the last
    sequence (padding) are zero.
    """
    out = torch.empty_like(q)
    starts = meta.cu_seqlens_q.tolist()
    tables = meta.block_tables.long()
    num_kv_heads = k_cache.shape[2]
    for b, context_len in enumerate(meta.context_lens.tolist()):
        start, end = starts[b], starts[b + 1]
        if end == start:
            continue
        k = _gather(k_cache, tables[b], context_len, "k")  # [L, Hkv, D]
        v = _gather(v_cache, tables[b], context_len, "v")
        result = _attend_sequence(q[start:end], k, v, scale)  # [g, Hkv, n, D]
        group = result.shape[0]
        out[start:end].view(end - start, num_kv_heads, group, -1).copy_(result.permute(2, 1, 0, 3))
    out[starts[-1]:].zero_()
    return out


def _gather(cache: torch.Tensor, table: torch.Tensor, length: int, slot: str) -> torch.Tensor:
    """A sequence's first ``length`` keys or values ``[length, Hkv, D]``, read through its block table."""
    block_size = cache.shape[1]
    num_blocks = -(-length // block_size)
    shape = (num_blocks, *cache.shape[1:])
    blocks = torch.index_select(cache, 0, table[:num_blocks], out=_workspace(slot, shape, cache))
    return blocks.view(num_blocks * block_size, *cache.shape[2:])[:length]


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
    key = (slot, like.dtype)
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < numel:
        buffer = torch.empty(numel, dtype=like.dtype)
        buffers[key] = buffer
    return buffer[:numel].view(shape)


def _attend_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Bottom-right causal attention of one sequence's ``q [n, Hq, D]`` over ``k, v [L, Hkv, D]``.

    GQA: the ``g = Hq / Hkv`` query heads that share a KV head become a batch of ``g`` over the KV heads
    (query head ``h`` reads KV head ``h // g``, as in transformers), and K/V are broadcast over that batch
    without a copy. Returns ``[g, Hkv, n, D]``.
    """
    q_len, num_q_heads, head_dim = q.shape
    context_len, num_kv_heads = k.shape[0], k.shape[1]
    group = num_q_heads // num_kv_heads
    queries = q.view(q_len, num_kv_heads, group, head_dim).permute(2, 1, 0, 3)  # [g, Hkv, n, D]

    def keys(x: torch.Tensor) -> torch.Tensor:  # [m, Hkv, D] -> [g, Hkv, m, D]
        return x.permute(1, 0, 2).unsqueeze(0).expand(group, -1, -1, -1)

    if q.device.type != "cpu":
        return _attend_masked(queries, keys(k), keys(v), scale)
    if q_len == 1:  # one query sees every key: no mask, no split
        return _flash(queries, keys(k), keys(v), scale, causal=False)[0]
    prefix_len = context_len - q_len
    new_out, new_lse = _flash(queries, keys(k[prefix_len:]), keys(v[prefix_len:]), scale, causal=True)
    if prefix_len == 0:
        return new_out
    old_out, old_lse = _flash(queries, keys(k[:prefix_len]), keys(v[:prefix_len]), scale, causal=False)
    return _merge(old_out, old_lse, new_out, new_lse)


def _flash(q, k, v, scale: float, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's CPU flash attention: ``[B, H, Lq, D]`` outputs and their float32 log-sum-exps ``[B, H, Lq]``."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)
    return out, lse


def _merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor) -> torch.Tensor:
    """Attention over the union of two disjoint key sets from each set's normalised output and log-sum-exp."""
    lse = torch.logaddexp(lse_a, lse_b)
    weight_a = torch.exp(lse_a - lse).unsqueeze(-1)
    weight_b = torch.exp(lse_b - lse).unsqueeze(-1)
    merged = out_a.float() * weight_a
    merged.addcmul_(out_b.float(), weight_b)
    return merged.to(out_a.dtype)


def _attend_masked(q, k, v, scale: float) -> torch.Tensor:
    """The same attention on other devices (the torch backend forced on CUDA): one SDPA call with an
    explicit bottom-right causal mask."""
    q_len, context_len = q.shape[2], k.shape[2]
    query_pos = torch.arange(context_len - q_len, context_len, device=q.device)
    mask = torch.arange(context_len, device=q.device)[None, :] <= query_pos[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
