"""Block pool and prefix cache: refcounts, hash verification, LRU eviction, pending blocks; and the contract the
scheduler uses (computed_blocks, allocate_slots, register_full_blocks, mark_computed, free_sequence)."""

from __future__ import annotations

import pytest

from judge_engine.engine import block_manager as bm_module
from judge_engine.engine.block_manager import BlockManager, NoFreeBlocks
from judge_engine.engine.sampler import SamplingParams
from judge_engine.engine.sequence import Sequence

BS = 4


def sequence(token_ids: list[int]) -> Sequence:
    return Sequence("r", list(token_ids), SamplingParams(max_tokens=1))


def fill(bm: BlockManager, token_ids: list[int], computed: bool = True) -> tuple[list[int], Sequence]:
    """A sequence of token_ids given blocks from scratch, its full blocks registered and optionally computed;
    returns its block table and the sequence (free it with bm.free_sequence)."""
    seq = sequence(token_ids)
    assert bm.allocate_slots(seq, len(token_ids))
    bm.register_full_blocks(seq, len(token_ids))
    if computed:
        bm.mark_computed(seq, 0, len(token_ids))
    return list(bm.block_table(seq)), seq


def test_allocate_and_free_return_every_block():
    bm = BlockManager(8, BS)
    table = bm.allocate(5)
    assert len(set(table)) == 5 and bm.num_free_blocks == 3 and bm.num_used == 5
    bm.check_invariants([table])
    bm.free(table)
    assert bm.num_free_blocks == 8 and bm.num_used == 0
    bm.check_invariants([])


def test_allocating_more_than_free_raises():
    bm = BlockManager(2, BS)
    bm.allocate(2)
    assert not bm.can_allocate(1)
    with pytest.raises(NoFreeBlocks):
        bm.allocate(1)


def test_double_free_is_caught():
    bm = BlockManager(2, BS)
    table = bm.allocate(1)
    bm.free(table)
    with pytest.raises(AssertionError):
        bm.free(table)


def test_prefix_hit_after_release_reuses_the_same_blocks():
    bm = BlockManager(8, BS)
    tokens = list(range(10))  # two full blocks and a partial one
    table, seq = fill(bm, tokens)
    bm.free_sequence(seq)
    match = bm.match_prefix(tokens, max_tokens=9)
    assert match.block_ids == table[:2] and not match.pending
    bm.acquire(match.block_ids)
    assert all(bm.blocks[b].ref_count == 1 for b in match.block_ids)
    bm.check_invariants([match.block_ids])


def test_shared_prefix_is_refcounted_and_survives_one_release():
    bm = BlockManager(8, BS)
    tokens = list(range(8))
    table, seq = fill(bm, tokens + [99])
    match = bm.match_prefix(tokens + [50, 51], max_tokens=9)
    bm.acquire(match.block_ids)
    assert [bm.blocks[b].ref_count for b in table[:2]] == [2, 2]
    bm.free_sequence(seq)
    assert [bm.blocks[b].ref_count for b in table[:2]] == [1, 1]
    bm.check_invariants([match.block_ids])


def test_match_stops_at_max_tokens():
    bm = BlockManager(8, BS)
    tokens = list(range(12))
    table, _ = fill(bm, tokens)
    assert bm.match_prefix(tokens, max_tokens=11).block_ids == table[:2]
    assert bm.match_prefix(tokens, max_tokens=3).block_ids == []


def test_registered_block_matches_before_its_step_ran_and_is_flagged_pending():
    bm = BlockManager(8, BS)
    tokens = list(range(8))
    table, seq = fill(bm, tokens, computed=False)
    match = bm.match_prefix(tokens, max_tokens=8)
    assert match.block_ids == table and match.pending
    bm.mark_computed(seq, 0, 8)
    match = bm.match_prefix(tokens, max_tokens=8)
    assert match.block_ids == table and not match.pending


def test_uncomputed_block_released_is_forgotten():
    bm = BlockManager(4, BS)
    tokens = list(range(4))
    table, seq = fill(bm, tokens, computed=False)
    bm.free_sequence(seq)  # preempted or aborted before its step ran: the cache never got its content
    match = bm.match_prefix(tokens, max_tokens=4)
    assert match.block_ids == [] and not match.pending
    bm.check_invariants([])


def test_hash_collision_is_verified_against_token_ids(monkeypatch):
    monkeypatch.setattr(bm_module, "block_hash", lambda parent, tokens: 7)  # every block collides
    bm = BlockManager(8, BS)
    first = [1, 2, 3, 4]
    table, seq = fill(bm, first)
    bm.free_sequence(seq)
    other = [5, 6, 7, 8]
    assert bm.match_prefix(other, max_tokens=4).block_ids == []
    assert bm.match_prefix(first, max_tokens=4).block_ids == table


def test_hash_collision_in_the_chain_checks_the_parent_block(monkeypatch):
    """Same second block, different first block, every hash equal: the parent check must refuse it."""
    monkeypatch.setattr(bm_module, "block_hash", lambda parent, tokens: hash(tokens))  # ignores the chain
    bm = BlockManager(8, BS)
    a = [1, 1, 1, 1, 9, 9, 9, 9]
    table_a, seq_a = fill(bm, a)
    bm.free_sequence(seq_a)
    b = [2, 2, 2, 2, 9, 9, 9, 9]
    table_b, seq_b = fill(bm, b)  # block 0 of b is new; block 1's hash is taken by a's block 1
    bm.free_sequence(seq_b)
    match = bm.match_prefix(b, max_tokens=8)
    assert match.block_ids == [table_b[0]]  # a's second block is not b's, even though tokens and hash agree


def test_eviction_takes_only_unreferenced_blocks_least_recent_first():
    bm = BlockManager(4, BS)
    held, _ = fill(bm, [1, 1, 1, 1])
    old, old_seq = fill(bm, [2, 2, 2, 2])
    new, new_seq = fill(bm, [3, 3, 3, 3])
    bm.free_sequence(old_seq)
    bm.free_sequence(new_seq)
    plain = bm.allocate(1)  # the never-used block goes first
    assert plain[0] not in held + old + new
    evicted = bm.allocate(1)
    assert evicted == old  # least recently released cached block
    assert bm.match_prefix([2, 2, 2, 2, 0], 4).block_ids == []
    assert bm.match_prefix([3, 3, 3, 3, 0], 4).block_ids == new
    assert bm.blocks[held[0]].ref_count == 1
    bm.check_invariants([held, plain, evicted])


def test_evicted_parent_orphans_its_children():
    bm = BlockManager(3, BS)
    tokens = list(range(8))
    table, seq = fill(bm, tokens)
    bm.free_sequence(seq)  # tail queued first, so the head is evicted last
    bm.allocate(1)  # plain block
    taken = bm.allocate(1)
    assert taken == [table[1]]  # the child went first, the shared head stays


def test_prefix_caching_disabled_never_matches():
    bm = BlockManager(8, BS, enable_prefix_caching=False)
    tokens = list(range(8))
    table, seq = fill(bm, tokens)
    assert not any(bm.blocks[b].hash for b in table)  # nothing indexed
    bm.free_sequence(seq)
    assert bm.match_prefix(tokens, 8).block_ids == []
    assert bm.num_free_blocks == 8
    bm.check_invariants([])


def test_reset_prefix_cache_frees_cached_blocks():
    bm = BlockManager(4, BS)
    _, seq = fill(bm, list(range(8)))
    bm.free_sequence(seq)
    bm.reset_prefix_cache()
    assert bm.match_prefix(list(range(8)), 8).block_ids == []
    bm.check_invariants([])


def test_admission_takes_the_cached_prefix_and_only_allocates_the_rest():
    bm = BlockManager(8, BS)
    tokens = list(range(10))
    table, first = fill(bm, tokens)
    second = sequence(tokens[:8] + [70, 71, 72])
    computed = bm.computed_blocks(second)
    assert computed.block_ids == table[:2] and computed.num_tokens(BS) == 8
    assert bm.allocate_slots(second, 3, computed)
    assert bm.block_table(second)[:2] == table[:2] and len(bm.block_table(second)) == 3
    assert [bm.blocks[b].ref_count for b in table[:2]] == [2, 2]
    bm.check_invariants()
    bm.free_sequence(first)
    bm.free_sequence(second)
    assert bm.num_used == 0
    bm.check_invariants()


def test_an_admission_that_does_not_fit_holds_nothing():
    bm = BlockManager(3, BS)
    table, first = fill(bm, list(range(8)))  # two blocks; one left
    seq = sequence(list(range(8)) + list(range(100, 109)))  # the cached two blocks + 9 tokens = 3 more blocks
    computed = bm.computed_blocks(seq)
    assert len(computed.block_ids) == 2
    assert not bm.allocate_slots(seq, 9, computed)
    assert bm.block_table(seq) == [] and [bm.blocks[b].ref_count for b in table] == [1, 1]
    bm.check_invariants()


def test_a_running_sequence_that_cannot_grow_keeps_its_blocks():
    bm = BlockManager(2, BS)
    seq = sequence(list(range(8)))
    assert bm.allocate_slots(seq, 8)
    seq.num_computed_tokens = 8
    assert not bm.allocate_slots(seq, 1)
    assert len(bm.block_table(seq)) == 2
    bm.check_invariants()


def test_growing_one_token_at_a_time_registers_each_block_once_it_fills():
    bm = BlockManager(8, BS)
    seq = sequence([1, 2, 3])
    for _ in range(6):  # decode: each step computes the last token and appends the next
        assert bm.allocate_slots(seq, seq.num_tokens - seq.num_computed_tokens)
        bm.register_full_blocks(seq, seq.num_tokens)
        bm.mark_computed(seq, seq.num_computed_tokens, seq.num_tokens)
        seq.num_computed_tokens = seq.num_tokens
        seq.token_ids.append(seq.num_tokens + 1)
    assert seq.token_ids == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    table = bm.block_table(seq)
    assert len(table) == 2  # 8 tokens computed: two full blocks
    other = sequence([1, 2, 3, 4, 5, 6, 7, 8, 50])
    assert bm.computed_blocks(other).block_ids == table
    bm.check_invariants()


def test_free_sequence_of_a_sequence_that_never_ran_is_a_no_op():
    bm = BlockManager(2, BS)
    bm.free_sequence(sequence([1, 2]))
    assert bm.num_free_blocks == 2
