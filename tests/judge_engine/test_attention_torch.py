"""The torch paged-attention path against a dense float64 reference, and its batch invariance."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_models import contiguous_layout

from judge_engine.layers.attention import get_backend
from judge_engine.layers.attention.torch_paged import paged_attention, store_kv

torch.set_num_threads(min(2, torch.get_num_threads()))

HEAD_DIM = 32
# Every flash-attention call has 32-row query tiles (torch_paged.QUERY_TILE), so every path agrees bit for bit.
INVARIANCE_TOL = 0.0


def _dense_reference(q, k, v, q_len):
    """Causal bottom-right attention of ``q [n, Hq, D]`` over ``k, v [L, Hkv, D]`` in float64."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    context_len = k.shape[0]
    query_pos = torch.arange(context_len - q_len, context_len)
    allowed = torch.arange(context_len)[None, :] <= query_pos[:, None]
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


def _build(query_lens, context_lens, block_size, num_q_heads, num_kv_heads, *, seed=0, padding=0, dtype=torch.float32):
    """Random K/V for every context position, cached prefix written to the cache, new K/V stored by store_kv."""
    gen = torch.Generator().manual_seed(seed)
    meta, num_blocks, slots = contiguous_layout(
        query_lens, context_lens, block_size, shuffle_seed=seed, extra_blocks=2, padding_tokens=padding
    )
    k_cache = torch.randn(num_blocks, block_size, num_kv_heads, HEAD_DIM, generator=gen).to(dtype)
    v_cache = torch.randn(num_blocks, block_size, num_kv_heads, HEAD_DIM, generator=gen).to(dtype)
    keys = [torch.randn(n, num_kv_heads, HEAD_DIM, generator=gen).to(dtype) for n in context_lens]
    values = [torch.randn(n, num_kv_heads, HEAD_DIM, generator=gen).to(dtype) for n in context_lens]
    for b, n in enumerate(context_lens):
        prefix = n - query_lens[b]
        index = torch.tensor(slots[b][:prefix], dtype=torch.long)
        k_cache.view(-1, num_kv_heads, HEAD_DIM)[index] = keys[b][:prefix]
        v_cache.view(-1, num_kv_heads, HEAD_DIM)[index] = values[b][:prefix]
    new_k = [keys[b][n - query_lens[b] :] for b, n in enumerate(context_lens)]
    new_v = [values[b][n - query_lens[b] :] for b, n in enumerate(context_lens)]
    noise = torch.randn(padding, num_kv_heads, HEAD_DIM, generator=gen).to(dtype)
    store_kv(torch.cat(new_k + [noise]), torch.cat(new_v + [noise]), k_cache, v_cache, meta.slot_mapping)
    q = torch.randn(sum(query_lens) + padding, num_q_heads, HEAD_DIM, generator=gen).to(dtype)
    return q, k_cache, v_cache, meta, keys, values


def _check_against_reference(q, k_cache, v_cache, meta, keys, values, query_lens, atol):
    out = paged_attention(q, k_cache, v_cache, meta, 1 / math.sqrt(HEAD_DIM))
    start = 0
    for b, q_len in enumerate(query_lens):
        expected = _dense_reference(q[start : start + q_len], keys[b], values[b], q_len)
        torch.testing.assert_close(out[start : start + q_len].double(), expected, atol=atol, rtol=0)
        start += q_len
    assert torch.count_nonzero(out[start:]) == 0, "padding rows must stay zero"
    return out


def test_store_kv_writes_slots_and_skips_padding():
    k_cache = torch.zeros(3, 4, 2, 8)
    v_cache = torch.zeros(3, 4, 2, 8)
    k = torch.arange(3 * 2 * 8, dtype=torch.float32).view(3, 2, 8) + 1
    store_kv(k, -k, k_cache, v_cache, torch.tensor([5, -1, 11]))
    flat_k, flat_v = k_cache.view(12, 2, 8), v_cache.view(12, 2, 8)
    assert torch.equal(flat_k[5], k[0]) and torch.equal(flat_k[11], k[2])
    assert torch.equal(flat_v[5], -k[0]) and torch.equal(flat_v[11], -k[2])
    assert torch.count_nonzero(flat_k) == 2 * 2 * 8, "the padding token must not be written anywhere"


@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (6, 1)])
def test_prefill_with_prefix_matches_dense(block_size, heads):
    # ragged: a fresh prompt, a prompt behind a cached prefix that ends mid-block, one token after a long prefix
    query_lens = [37, 20, 1, 16]
    context_lens = [37, 53, 70, 16 + block_size]
    q, k_cache, v_cache, meta, keys, values = _build(query_lens, context_lens, block_size, *heads, padding=3)
    _check_against_reference(q, k_cache, v_cache, meta, keys, values, query_lens, atol=1e-5)


@pytest.mark.parametrize("block_size", [16, 32])
def test_decode_matches_dense(block_size):
    context_lens = [1, 17, 64, 100, 33]
    query_lens = [1] * len(context_lens)
    q, k_cache, v_cache, meta, keys, values = _build(query_lens, context_lens, block_size, 8, 2, seed=3, padding=2)
    assert meta.is_decode
    _check_against_reference(q, k_cache, v_cache, meta, keys, values, query_lens, atol=1e-5)


def test_decode_is_batch_invariant_and_equals_single_query_prefill():
    context_lens = [5, 90, 40, 129]
    q, k_cache, v_cache, meta, _, _ = _build([1] * 4, context_lens, 16, 8, 2, seed=7)
    scale = 1 / math.sqrt(HEAD_DIM)
    batched = paged_attention(q, k_cache, v_cache, meta, scale)
    for b in range(len(context_lens)):
        alone = _slice_meta(meta, b)
        single = paged_attention(q[b : b + 1], k_cache, v_cache, alone, scale)
        torch.testing.assert_close(batched[b : b + 1], single, atol=INVARIANCE_TOL, rtol=0)
        alone.is_decode = False  # the prefill path with one query token
        as_prefill = paged_attention(q[b : b + 1], k_cache, v_cache, alone, scale)
        torch.testing.assert_close(batched[b : b + 1], as_prefill, atol=INVARIANCE_TOL, rtol=0)


def test_prefill_is_batch_invariant():
    query_lens, context_lens = [12, 30, 7], [12, 45, 60]
    q, k_cache, v_cache, meta, _, _ = _build(query_lens, context_lens, 16, 4, 2, seed=11)
    scale = 1 / math.sqrt(HEAD_DIM)
    batched = paged_attention(q, k_cache, v_cache, meta, scale)
    start = 0
    for b, q_len in enumerate(query_lens):
        alone = paged_attention(q[start : start + q_len], k_cache, v_cache, _slice_meta(meta, b), scale)
        assert torch.equal(batched[start : start + q_len], alone)
        start += q_len


def test_prompt_behind_a_cached_prefix_gets_the_same_result_as_whole():
    query_lens, context_lens = [40], [40]
    q, k_cache, v_cache, meta, _, _ = _build(query_lens, context_lens, 16, 8, 2, seed=5)
    scale = 1 / math.sqrt(HEAD_DIM)
    whole = paged_attention(q, k_cache, v_cache, meta, scale)
    for tail in (1, 7, 23):
        suffix_meta = _slice_meta(meta, 0)
        suffix_meta.cu_seqlens_q = torch.tensor([0, tail], dtype=torch.int32)
        suffix_meta.max_seqlen_q, suffix_meta.is_decode = tail, tail == 1
        suffix = paged_attention(q[40 - tail :], k_cache, v_cache, suffix_meta, scale)
        torch.testing.assert_close(suffix, whole[40 - tail :], atol=INVARIANCE_TOL, rtol=0)


def test_bfloat16_cache_close_to_reference():
    query_lens, context_lens = [9, 1], [40, 21]
    q, k_cache, v_cache, meta, keys, values = _build(query_lens, context_lens, 16, 4, 2, dtype=torch.bfloat16)
    out = _check_against_reference(q, k_cache, v_cache, meta, keys, values, query_lens, atol=3e-2)
    assert out.dtype == torch.bfloat16


def _slice_meta(meta, b):
    """The metadata of sequence ``b`` alone."""
    from judge_engine.layers.attention.metadata import AttentionMetadata

    start, end = int(meta.cu_seqlens_q[b]), int(meta.cu_seqlens_q[b + 1])
    return AttentionMetadata(
        slot_mapping=meta.slot_mapping[start:end],
        cu_seqlens_q=torch.tensor([0, end - start], dtype=torch.int32),
        context_lens=meta.context_lens[b : b + 1],
        block_tables=meta.block_tables[b : b + 1],
        max_seqlen_q=end - start,
        max_context_len=int(meta.context_lens[b]),
        is_decode=end - start == 1,
    )


def test_backend_selection():
    backend = get_backend(torch.device("cpu"))
    assert backend.name == "torch" and backend.paged_attention is paged_attention
    assert get_backend("cpu", force="torch").store_kv is store_kv
    with pytest.raises(ValueError, match="needs a CUDA device"):
        get_backend("cpu", force="triton")
    with pytest.raises(ValueError, match="attention_backend must be one of"):
        get_backend("cpu", force="flash")


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_sequences_sharing_cached_prefix_blocks_are_grouped_and_stay_batch_invariant(dtype, atol):
    """Criteria behind one shared 300-token prefix (the same cache blocks), short tails and a fresh 260-token
    prompt in one step: every query matches the dense reference, and equals its sequence computed alone bit for
    bit."""
    from judge_engine.layers.attention.metadata import AttentionMetadata

    block_size, num_q_heads, num_kv_heads = 16, 6, 2
    gen = torch.Generator().manual_seed(21)
    shared_len = 300
    suffixes = [20, 45, 1, 70]
    shared_blocks = list(range(shared_len // block_size))  # whole blocks only: 18 blocks, 288 positions
    shared_keep = len(shared_blocks) * block_size
    next_block = len(shared_blocks)
    tables, contexts, queries = [], [], []
    for suffix in suffixes:
        own = -(-(shared_len - shared_keep + suffix) // block_size)
        tables.append(shared_blocks + list(range(next_block, next_block + own)))
        next_block += own
        contexts.append(shared_len + suffix)
        queries.append(shared_len - shared_keep + suffix)  # computes its tail behind the shared blocks
    fresh = 260
    tables.append(list(range(next_block, next_block + -(-fresh // block_size))))
    next_block += -(-fresh // block_size)
    contexts.append(fresh)
    queries.append(fresh)
    k_cache = torch.randn(next_block + 1, block_size, num_kv_heads, HEAD_DIM, generator=gen).to(dtype)
    v_cache = torch.randn(next_block + 1, block_size, num_kv_heads, HEAD_DIM, generator=gen).to(dtype)
    width = max(len(t) for t in tables)
    block_tables = torch.full((len(tables), width), -1, dtype=torch.int32)
    for b, table in enumerate(tables):
        block_tables[b, :len(table)] = torch.tensor(table, dtype=torch.int32)
    cu = [0]
    for n in queries:
        cu.append(cu[-1] + n)
    meta = AttentionMetadata(slot_mapping=torch.zeros(cu[-1], dtype=torch.int64),
                             cu_seqlens_q=torch.tensor(cu, dtype=torch.int32),
                             context_lens=torch.tensor(contexts, dtype=torch.int32), block_tables=block_tables,
                             max_seqlen_q=max(queries), max_context_len=max(contexts), is_decode=False)
    q = torch.randn(cu[-1], num_q_heads, HEAD_DIM, generator=gen).to(dtype)
    scale = 1 / math.sqrt(HEAD_DIM)
    batched = paged_attention(q, k_cache, v_cache, meta, scale)
    assert batched.dtype == dtype
    for b, table in enumerate(tables):
        start, end = cu[b], cu[b + 1]
        slots = torch.tensor([table[p // block_size] * block_size + p % block_size for p in range(contexts[b])])
        keys = k_cache.view(-1, num_kv_heads, HEAD_DIM)[slots]
        values = v_cache.view(-1, num_kv_heads, HEAD_DIM)[slots]
        expected = _dense_reference(q[start:end], keys, values, end - start)
        torch.testing.assert_close(batched[start:end].double(), expected, atol=atol, rtol=0)
        alone = paged_attention(q[start:end], k_cache, v_cache, _slice_meta(meta, b), scale)
        torch.testing.assert_close(batched[start:end], alone, atol=INVARIANCE_TOL, rtol=0)
