"""Paged decode attention: one query token per sequence, keys and values read through the block table.

One program serves one (sequence, kv head, key partition) and all the query heads that share that kv
head (GQA), so each key tile is loaded once for the whole group and the query tile is [BLOCK_G, D] with
BLOCK_G >= 16, the smallest tile tl.dot accepts. Softmax is computed online, one key tile at a time.
When sequences x kv heads would leave most of the GPU idle (few long sequences), the keys are split
into partitions that run in parallel and a second kernel merges their partial softmaxes (as vLLM's
PagedAttention v2 and flash-decoding do). With a sliding window (``window`` > 0) every partition starts no
earlier than the window, so keys and block-table entries left of it (freed blocks, -1) are never read;
``softcap`` > 0 caps scores at softcap * tanh(score / softcap), as Gemma 2 does.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from judge_engine.layers.kernels.softcap import soft_cap_log2
from judge_engine.layers.kernels.tiling import dot_precision, dot_tile_size, key_tile_size

_LOG2_E = 1.4426950408889634
# A partition shorter than this costs more in the merge than it gains in parallelism.
MIN_PARTITION_KEYS = 256


@triton.jit
def _decode_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
    partial_out_ptr, partial_max_ptr, partial_sum_ptr,
    cu_seqlens_q_ptr, context_lens_ptr, block_tables_ptr,
    stride_qt, stride_qh, stride_qd,
    stride_ot, stride_oh, stride_od,
    stride_kc_block, stride_kc_offset, stride_kc_head, stride_kc_dim,
    stride_vc_block, stride_vc_offset, stride_vc_head, stride_vc_dim,
    stride_bt_seq,
    qk_scale_log2,
    head_dim, num_q_heads, num_partitions, partition_len,
    window,
    softcap,
    GROUP_SIZE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    SPLIT: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    partition = tl.program_id(2)
    token = tl.load(cu_seqlens_q_ptr + seq)
    context_len = tl.load(context_lens_ptr + seq)
    first_key = partition * partition_len
    end_key = tl.minimum(context_len, first_key + partition_len)
    # the one query sees every key from its window's start on: a partition left of it has nothing to do
    first_key = tl.maximum(first_key, tl.where(window > 0, context_len - window, 0))

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
    for start in range(first_key, end_key, BLOCK_N):
        positions = start + tile
        in_range = positions < end_key
        # Each key finds its own block: correct whether BLOCK_N equals, spans or splits a cache block.
        block_ids = tl.load(block_tables_ptr + seq * stride_bt_seq + positions // BLOCK_SIZE,
                            mask=in_range, other=0).to(tl.int64)
        offsets = positions % BLOCK_SIZE
        kv_mask = in_range[:, None] & (dims[None, :] < head_dim)
        k = tl.load(k_cache_ptr + block_ids[:, None] * stride_kc_block + offsets[:, None] * stride_kc_offset
                    + kv_head * stride_kc_head + dims[None, :] * stride_kc_dim, mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + block_ids[:, None] * stride_vc_block + offsets[:, None] * stride_vc_offset
                    + kv_head * stride_vc_head + dims[None, :] * stride_vc_dim, mask=kv_mask, other=0.0)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale_log2
        if softcap > 0:
            scores = soft_cap_log2(scores, softcap)
        scores = tl.where(in_range[None, :], scores, float("-inf"))
        # The first tile of a partition always holds a key, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        p = tl.exp2(scores - m_new[:, None])
        correction = tl.exp2(m_i - m_new)
        l_i = l_i * correction + tl.sum(p, 1)
        acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    # A partition past the end of a short sequence, or left of its window, has no keys: l_i stays 0, and the
    # guard keeps its row at zeros instead of NaN (the merge then gives it weight 0).
    acc = acc / tl.maximum(l_i, 1e-30)[:, None]
    if SPLIT:
        row = (seq * num_q_heads + q_heads) * num_partitions + partition
        tl.store(partial_max_ptr + row, m_i, mask=group < GROUP_SIZE)
        tl.store(partial_sum_ptr + row, l_i, mask=group < GROUP_SIZE)
        tl.store(partial_out_ptr + row[:, None] * BLOCK_D + dims[None, :], acc, mask=q_mask)
    else:
        tl.store(out_ptr + token * stride_ot + q_heads[:, None] * stride_oh + dims[None, :] * stride_od,
                 acc.to(out_ptr.dtype.element_ty), mask=q_mask)


@triton.jit
def _merge_partitions_kernel(
    out_ptr, partial_out_ptr, partial_max_ptr, partial_sum_ptr, cu_seqlens_q_ptr,
    stride_ot, stride_oh, stride_od,
    head_dim, num_q_heads, num_partitions,
    BLOCK_P: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    seq = tl.program_id(0)
    q_head = tl.program_id(1)
    token = tl.load(cu_seqlens_q_ptr + seq)
    parts = tl.arange(0, BLOCK_P)
    dims = tl.arange(0, BLOCK_D)
    part_valid = parts < num_partitions
    rows = (seq * num_q_heads + q_head) * num_partitions + parts
    maxes = tl.load(partial_max_ptr + rows, mask=part_valid, other=float("-inf"))
    sums = tl.load(partial_sum_ptr + rows, mask=part_valid, other=0.0)
    # The partition holding the last key is never empty, so the overall max is finite; empty partitions weigh
    # exp2(-inf) = 0.
    weights = tl.exp2(maxes - tl.max(maxes, 0)) * sums
    partials = tl.load(partial_out_ptr + rows[:, None] * BLOCK_D + dims[None, :],
                       mask=part_valid[:, None] & (dims[None, :] < head_dim), other=0.0)
    merged = tl.sum(partials * weights[:, None], 0) / tl.maximum(tl.sum(weights, 0), 1e-30)
    tl.store(out_ptr + token * stride_ot + q_head * stride_oh + dims * stride_od,
             merged.to(out_ptr.dtype.element_ty), mask=dims < head_dim)


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_context_len: int,
    scale: float,
    out: torch.Tensor,
    num_partitions: int | None = None,
    window: int = 0,
    softcap: float = 0.0,
) -> torch.Tensor:
    """Attention of the query token at row cu_seqlens_q[b] of `q` over the first context_lens[b] cached keys
    (the last `window` of them when window > 0; scores soft-capped at softcap when softcap > 0).

    num_partitions: how many parallel pieces each sequence's keys are split into; None chooses from the
    batch shape and the GPU's size (tests set it to exercise the merge)."""
    num_seqs = context_lens.shape[0]
    _, num_q_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group_size = num_q_heads // num_kv_heads
    if num_seqs == 0 or max_context_len == 0:
        return out
    block_n = key_tile_size(block_size, q.dtype)
    block_d = dot_tile_size(head_dim)
    if num_partitions is None:
        num_partitions = _choose_partitions(num_seqs * num_kv_heads, max_context_len, q.device)
    num_partitions = max(1, min(num_partitions, triton.cdiv(max_context_len, block_n)))
    partition_len = triton.cdiv(triton.cdiv(max_context_len, num_partitions), block_n) * block_n
    num_partitions = triton.cdiv(max_context_len, partition_len)  # rounding up may leave fewer
    split = num_partitions > 1
    if split:
        partial_out = torch.empty(num_seqs, num_q_heads, num_partitions, block_d, dtype=torch.float32, device=q.device)
        partial_max = torch.empty(num_seqs, num_q_heads, num_partitions, dtype=torch.float32, device=q.device)
        partial_sum = torch.empty_like(partial_max)
    else:
        partial_out = partial_max = partial_sum = out  # never touched: SPLIT is off
    _decode_attention_kernel[(num_seqs, num_kv_heads, num_partitions)](
        q, k_cache, v_cache, out,
        partial_out, partial_max, partial_sum,
        cu_seqlens_q, context_lens, block_tables,
        *q.stride(), *out.stride(), *k_cache.stride(), *v_cache.stride(),
        block_tables.stride(0),
        scale * _LOG2_E,
        head_dim, num_q_heads, num_partitions, partition_len,
        window,
        float(softcap),
        GROUP_SIZE=group_size,
        BLOCK_SIZE=block_size,
        BLOCK_G=dot_tile_size(group_size),
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        DOT_PRECISION=dot_precision(q.dtype),
        SPLIT=split,
    )
    if split:
        _merge_partitions_kernel[(num_seqs, num_q_heads)](
            out, partial_out, partial_max, partial_sum, cu_seqlens_q,
            *out.stride(),
            head_dim, num_q_heads, num_partitions,
            BLOCK_P=triton.next_power_of_2(num_partitions),
            BLOCK_D=block_d,
        )
    return out


def _choose_partitions(num_programs: int, max_context_len: int, device: torch.device) -> int:
    """Enough partitions for about two programs per multiprocessor, none shorter than MIN_PARTITION_KEYS."""
    target = 2 * _multiprocessor_count(device)
    if num_programs >= target:
        return 1
    return max(1, min(triton.cdiv(target, num_programs), max_context_len // MIN_PARTITION_KEYS))


@functools.cache
def _multiprocessor_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 1  # the interpreter runs programs one by one: splitting only adds work
    return torch.cuda.get_device_properties(device).multi_processor_count
