"""Block pool and prefix cache: refcounts, hash verification, LRU eviction, pending blocks."""

from __future__ import annotations

import pytest

from judge_engine import block_manager as bm_module
from judge_engine.block_manager import BlockManager, NoFreeBlocks

BS = 4


def fill(bm: BlockManager, token_ids: list[int], computed: bool = True) -> tuple[list[int], list[int]]:
    """Allocate a table for token_ids from scratch, register its full blocks, optionally mark them computed."""
    table = bm.allocate(-(-len(token_ids) // BS))
    hashes: list[int] = []
    for index in range(len(token_ids) // BS):
        bm.register_full_block(table, hashes, index, token_ids)
    if computed:
        bm.mark_computed(table)
    return table, hashes


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
    table, _ = fill(bm, tokens)
    bm.free(table)
    match = bm.match_prefix(tokens, max_tokens=9)
    assert match.block_ids == table[:2] and not match.pending
    bm.acquire(match.block_ids)
    assert all(bm.blocks[b].ref_count == 1 for b in match.block_ids)
    bm.check_invariants([match.block_ids])


def test_shared_prefix_is_refcounted_and_survives_one_release():
    bm = BlockManager(8, BS)
    tokens = list(range(8))
    table, _ = fill(bm, tokens + [99])
    match = bm.match_prefix(tokens + [50, 51], max_tokens=9)
    bm.acquire(match.block_ids)
    assert [bm.blocks[b].ref_count for b in table[:2]] == [2, 2]
    bm.free(table)
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
    table, _ = fill(bm, tokens, computed=False)
    match = bm.match_prefix(tokens, max_tokens=8)
    assert match.block_ids == table and match.pending
    bm.mark_computed(table)
    match = bm.match_prefix(tokens, max_tokens=8)
    assert match.block_ids == table and not match.pending


def test_uncomputed_block_released_is_forgotten():
    bm = BlockManager(4, BS)
    tokens = list(range(4))
    table, _ = fill(bm, tokens, computed=False)
    bm.free(table)  # preempted or aborted before its step ran: the cache never got its content
    match = bm.match_prefix(tokens, max_tokens=4)
    assert match.block_ids == [] and not match.pending
    bm.check_invariants([])


def test_hash_collision_is_verified_against_token_ids(monkeypatch):
    monkeypatch.setattr(bm_module, "block_hash", lambda parent, tokens: 7)  # every block collides
    bm = BlockManager(8, BS)
    first = [1, 2, 3, 4]
    table, _ = fill(bm, first)
    bm.free(table)
    other = [5, 6, 7, 8]
    assert bm.match_prefix(other, max_tokens=4).block_ids == []
    assert bm.match_prefix(first, max_tokens=4).block_ids == table


def test_hash_collision_in_the_chain_checks_the_parent_block(monkeypatch):
    """Same second block, different first block, every hash equal: the parent check must refuse it."""
    monkeypatch.setattr(bm_module, "block_hash", lambda parent, tokens: hash(tokens))  # ignores the chain
    bm = BlockManager(8, BS)
    a = [1, 1, 1, 1, 9, 9, 9, 9]
    table_a, _ = fill(bm, a)
    bm.free(table_a)
    b = [2, 2, 2, 2, 9, 9, 9, 9]
    table_b, hashes_b = fill(bm, b)  # block 0 of b is new; block 1's hash is taken by a's block 1
    bm.free(table_b)
    match = bm.match_prefix(b, max_tokens=8)
    assert match.block_ids == [table_b[0]]  # a's second block is not b's, even though tokens and hash agree


def test_eviction_takes_only_unreferenced_blocks_least_recent_first():
    bm = BlockManager(4, BS)
    held, _ = fill(bm, [1, 1, 1, 1])
    old, _ = fill(bm, [2, 2, 2, 2])
    new, _ = fill(bm, [3, 3, 3, 3])
    bm.free(old)
    bm.free(new)
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
    table, _ = fill(bm, tokens)
    bm.free(table)  # tail queued first, so the head is evicted last
    bm.allocate(1)  # plain block
    taken = bm.allocate(1)
    assert taken == [table[1]]  # the child went first, the shared head stays


def test_prefix_caching_disabled_never_matches():
    bm = BlockManager(8, BS, enable_prefix_caching=False)
    tokens = list(range(8))
    table, hashes = fill(bm, tokens)
    assert len(hashes) == 2  # the chain is still tracked, only the index is off
    bm.free(table)
    assert bm.match_prefix(tokens, 8).block_ids == []
    assert bm.num_free_blocks == 8
    bm.check_invariants([])


def test_reset_prefix_cache_frees_cached_blocks():
    bm = BlockManager(4, BS)
    table, _ = fill(bm, list(range(8)))
    bm.free(table)
    bm.reset_prefix_cache()
    assert bm.match_prefix(list(range(8)), 8).block_ids == []
    bm.check_invariants([])
