"""Paged decode attention: one query token per sequence, keys and values read through the block table.

One program serves one (sequence, kv head) pair and all the query heads that share that kv head (GQA),
so each key block is loaded once for the whole group and the query tile is [BLOCK_G, D] with
BLOCK_G >= 16, the smallest tile tl.dot accepts. Softmax is computed online, one key tile at a time.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from judge_engine.kernels.tiling import dot_precision, key_tile_size

_LOG2_E = 1.4426950408889634


@triton.jit
def _decode_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
    cu_seqlens_q_ptr, context_lens_ptr, block_tables_ptr,
    stride_qt, stride_qh, stride_qd,
    stride_ot, stride_oh, stride_od,
    stride_kc_block, stride_kc_offset, stride_kc_head, stride_kc_dim,
    stride_vc_block, stride_vc_offset, stride_vc_head, stride_vc_dim,
    stride_bt_seq,
    qk_scale_log2,
    head_dim,
    GROUP_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    token = tl.load(cu_seqlens_q_ptr + seq)
    context_len = tl.load(context_lens_ptr + seq)

    group = tl.arange(0, BLOCK_G)
    dims = tl.arange(0, BLOCK_D)
    q_heads = kv_head * GROUP_SIZE + group
    q_mask = (group[:, None] < GROUP_SIZE) & (dims[None, :] < head_dim)
    q = tl.load(q_ptr + token * stride_qt + q_heads[:, None] * stride_qh + dims[None, :] * stride_qd,
                mask=q_mask, other=0.0)

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    tile = tl.arange(0, BLOCK_N)
    for start in range(0, context_len, BLOCK_N):
        positions = start + tile
        in_context = positions < context_len
        # Each key finds its own block: correct whether BLOCK_N equals, spans or splits a cache block.
        block_ids = tl.load(block_tables_ptr + seq * stride_bt_seq + positions // BLOCK_SIZE,
                            mask=in_context, other=0).to(tl.int64)
        offsets = positions % BLOCK_SIZE
        kv_mask = in_context[:, None] & (dims[None, :] < head_dim)
        k = tl.load(k_cache_ptr + block_ids[:, None] * stride_kc_block + offsets[:, None] * stride_kc_offset
                    + kv_head * stride_kc_head + dims[None, :] * stride_kc_dim, mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + block_ids[:, None] * stride_vc_block + offsets[:, None] * stride_vc_offset
                    + kv_head * stride_vc_head + dims[None, :] * stride_vc_dim, mask=kv_mask, other=0.0)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale_log2
        scores = tl.where(in_context[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        p = tl.exp2(scores - m_new[:, None])
        correction = tl.exp2(m_i - m_new)
        l_i = l_i * correction + tl.sum(p, 1)
        acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    # An empty context leaves l_i at 0; the guard keeps that row at zeros instead of NaN.
    acc = acc / tl.maximum(l_i, 1e-30)[:, None]
    tl.store(out_ptr + token * stride_ot + q_heads[:, None] * stride_oh + dims[None, :] * stride_od,
             acc.to(out_ptr.dtype.element_ty), mask=q_mask)


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
    scale: float,
    out: torch.Tensor,
) -> torch.Tensor:
    """Attention of the query token at row cu_seqlens_q[b] of `q` over the first context_lens[b] cached keys."""
    num_seqs = context_lens.shape[0]
    _, num_q_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group_size = num_q_heads // num_kv_heads
    if num_seqs == 0:
        return out
    _decode_attention_kernel[(num_seqs, num_kv_heads)](
        q, k_cache, v_cache, out,
        cu_seqlens_q, context_lens, block_tables,
        *q.stride(), *out.stride(), *k_cache.stride(), *v_cache.stride(),
        block_tables.stride(0),
        scale * _LOG2_E,
        head_dim,
        GROUP_SIZE=group_size,
        BLOCK_SIZE=block_size,
        BLOCK_G=max(16, triton.next_power_of_2(group_size)),
        BLOCK_N=key_tile_size(block_size, q.dtype),
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        DOT_PRECISION=dot_precision(q.dtype),
    )
    return out
