"""Paged prefill attention: ragged query lengths, keys from the cached prefix plus the new tokens.

The new tokens' keys are already in the cache (store_kv runs first), so every key is read through
the block table. Query i of sequence b sits at absolute position context_len - q_len + i and sees
keys 0..that position: the causal mask is aligned bottom-right, which covers prefix-cache hits and
chunked prefill alike. One program serves BLOCK_M query rows of one sequence and one query head;
its key loop stops at the causal limit of its last row, so it never loads keys none of its rows can see.
With a sliding window (``window`` > 0: row p sees keys p - window + 1 .. p) the loop also starts at its first
row's window, so block-table entries left of every window (freed blocks, -1) are never read; ``softcap`` > 0
caps scores at softcap * tanh(score / softcap), as Gemma 2 does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from judge_engine.layers.kernels.softcap import soft_cap_log2
from judge_engine.layers.kernels.tiling import dot_precision, dot_tile_size, key_tile_size, query_tile_size

_LOG2_E = 1.4426950408889634


@triton.jit
def _prefill_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
    cu_seqlens_q_ptr, context_lens_ptr, block_tables_ptr,
    stride_qt, stride_qh, stride_qd,
    stride_ot, stride_oh, stride_od,
    stride_kc_block, stride_kc_offset, stride_kc_head, stride_kc_dim,
    stride_vc_block, stride_vc_offset, stride_vc_head, stride_vc_dim,
    stride_bt_seq,
    qk_scale_log2,
    head_dim,
    window,
    softcap,
    GROUP_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    m_tile = tl.program_id(0)
    q_head = tl.program_id(1)
    seq = tl.program_id(2)
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    if m_tile * BLOCK_M >= q_len:
        return
    context_len = tl.load(context_lens_ptr + seq)
    kv_head = q_head // GROUP_SIZE

    rows = m_tile * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    row_valid = rows < q_len
    q_positions = context_len - q_len + rows
    q_mask = row_valid[:, None] & (dims[None, :] < head_dim)
    q = tl.load(q_ptr + (q_start + rows[:, None]) * stride_qt + q_head * stride_qh + dims[None, :] * stride_qd,
                mask=q_mask, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    tile = tl.arange(0, BLOCK_N)
    # The last row of this tile sees the most keys; nothing past it is needed by any row.
    key_limit = tl.minimum(context_len, context_len - q_len + (m_tile + 1) * BLOCK_M)
    # nor before the window of its first row
    key_start = tl.where(window > 0, tl.maximum(context_len - q_len + m_tile * BLOCK_M - window + 1, 0), 0)
    for start in range(key_start, key_limit, BLOCK_N):
        positions = start + tile
        in_context = positions < key_limit
        block_ids = tl.load(block_tables_ptr + seq * stride_bt_seq + positions // BLOCK_SIZE,
                            mask=in_context, other=0).to(tl.int64)
        offsets = positions % BLOCK_SIZE
        kv_mask = in_context[:, None] & (dims[None, :] < head_dim)
        k = tl.load(k_cache_ptr + block_ids[:, None] * stride_kc_block + offsets[:, None] * stride_kc_offset
                    + kv_head * stride_kc_head + dims[None, :] * stride_kc_dim, mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + block_ids[:, None] * stride_vc_block + offsets[:, None] * stride_vc_offset
                    + kv_head * stride_vc_head + dims[None, :] * stride_vc_dim, mask=kv_mask, other=0.0)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale_log2
        if softcap > 0:
            scores = soft_cap_log2(scores, softcap)
        visible = (positions[None, :] <= q_positions[:, None]) & in_context[None, :]
        if window > 0:
            visible = visible & (positions[None, :] > q_positions[:, None] - window)
        scores = tl.where(visible, scores, float("-inf"))
        # Without a window key 0 is visible to every row, so m_new is finite from the first tile on; a windowed
        # row may see nothing in the first tiles, whose max of -inf is read as 0 so exp2 never sees inf - inf.
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(scores - m_safe[:, None])
        correction = tl.exp2(m_i - m_safe)
        l_i = l_i * correction + tl.sum(p, 1)
        acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    acc = acc / tl.maximum(l_i, 1e-30)[:, None]
    tl.store(out_ptr + (q_start + rows[:, None]) * stride_ot + q_head * stride_oh + dims[None, :] * stride_od,
             acc.to(out_ptr.dtype.element_ty), mask=q_mask)


def prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_seqlen_q: int,
    scale: float,
    out: torch.Tensor,
    window: int = 0,
    softcap: float = 0.0,
) -> torch.Tensor:
    """Causal attention of each sequence's new tokens (rows cu_seqlens_q[b]:cu_seqlens_q[b+1] of `q`);
    window > 0: a sliding window of that many keys; softcap > 0: scores soft-capped at that value."""
    num_seqs = context_lens.shape[0]
    _, num_q_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if num_seqs == 0 or max_seqlen_q == 0:
        return out
    block_m = query_tile_size(max_seqlen_q, q.dtype)
    grid = (triton.cdiv(max_seqlen_q, block_m), num_q_heads, num_seqs)
    _prefill_attention_kernel[grid](
        q, k_cache, v_cache, out,
        cu_seqlens_q, context_lens, block_tables,
        *q.stride(), *out.stride(), *k_cache.stride(), *v_cache.stride(),
        block_tables.stride(0),
        scale * _LOG2_E,
        head_dim,
        window,
        float(softcap),
        GROUP_SIZE=num_q_heads // num_kv_heads,
        BLOCK_SIZE=block_size,
        BLOCK_M=block_m,
        BLOCK_N=key_tile_size(block_size, q.dtype),
        BLOCK_D=dot_tile_size(head_dim),
        DOT_PRECISION=dot_precision(q.dtype),
    )
    return out
