"""Stateful property test of the block pool: random sequences with shared prefixes grow, finish, get
preempted, with hash collisions forced on some runs, and the bookkeeping never goes wrong."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from judge_engine import block_manager as bm_module
from judge_engine.block_manager import BlockManager

BS = 4
NUM_BLOCKS = 12
PREFIXES = [[1] * 8, [1] * 4 + [2] * 4, [3] * 6]  # overlapping prefixes so that hits and partial hits happen


class LiveSeq:
    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens
        self.table: list[int] = []
        self.hashes: list[int] = []
        self.computed = 0


class BlockPoolMachine(RuleBasedStateMachine):
    @initialize(collide=st.booleans())
    def setup(self, collide: bool) -> None:
        self._original_hash = bm_module.block_hash
        if collide:  # every block under a handful of hashes: only verification keeps the cache correct
            bm_module.block_hash = lambda parent, tokens: sum(tokens) % 3
        self.bm = BlockManager(NUM_BLOCKS, BS)
        self.live: list[LiveSeq] = []
        # what each block's cache content really is: the token prefix it was computed for
        self.content: dict[int, tuple[int, ...]] = {}
        # what a registered block will hold once the step that fills it has run
        self.intended: dict[int, tuple[int, ...]] = {}

    def teardown(self) -> None:
        if hasattr(self, "_original_hash"):
            bm_module.block_hash = self._original_hash

    @rule(prefix=st.sampled_from(PREFIXES), suffix=st.lists(st.integers(1, 3), max_size=9))
    def admit(self, prefix: list[int], suffix: list[int]) -> None:
        seq = LiveSeq(prefix + suffix)
        match = self.bm.match_prefix(seq.tokens, len(seq.tokens) - 1)
        for index, block_id in enumerate(match.block_ids):
            # a hit must hold (or, filled by the step being scheduled, will hold) exactly this prefix
            holds = self.content if self.bm.blocks[block_id].computed else self.intended
            assert holds[block_id] == tuple(seq.tokens[:(index + 1) * BS])
        need = -(-len(seq.tokens) // BS) - len(match.block_ids)
        free_after_acquire = self.bm.num_free_blocks - sum(
            self.bm.blocks[b].ref_count == 0 for b in match.block_ids)
        if need > free_after_acquire:
            return
        self.bm.acquire(match.block_ids)
        seq.table = list(match.block_ids) + self.bm.allocate(need)
        seq.hashes = list(match.hashes)
        seq.computed = len(match.block_ids) * BS
        for index in range(len(seq.hashes), len(seq.tokens) // BS):
            self._register(seq, index)
        self.live.append(seq)
        if match.pending:  # admitted into the step that fills its hits: that step runs before anything else
            for other in self.live:
                self._run(other)

    def _register(self, seq: LiveSeq, index: int) -> None:
        self.bm.register_full_block(seq.table, seq.hashes, index, seq.tokens)
        if self.bm.blocks[seq.table[index]].hash == seq.hashes[index]:
            self.intended[seq.table[index]] = tuple(seq.tokens[:(index + 1) * BS])

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def run_step(self, data) -> None:
        self._run(data.draw(st.sampled_from(self.live)))

    def _run(self, seq: LiveSeq) -> None:
        start = seq.computed // BS
        for index in range(start, len(seq.table)):
            if (index + 1) * BS <= len(seq.tokens):
                self.content[seq.table[index]] = tuple(seq.tokens[:(index + 1) * BS])
        self.bm.mark_computed(seq.table[start:len(seq.tokens) // BS])
        seq.computed = len(seq.tokens)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), token=st.integers(1, 3))
    def grow(self, data, token: int) -> None:
        seq = data.draw(st.sampled_from(self.live))
        if seq.computed < len(seq.tokens):
            return
        if len(seq.tokens) % BS == 0:
            if not self.bm.can_allocate(1):
                return
            seq.table += self.bm.allocate(1)
        seq.tokens.append(token)
        if len(seq.tokens) % BS == 0:
            self._register(seq, len(seq.tokens) // BS - 1)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def release(self, data) -> None:
        seq = data.draw(st.sampled_from(self.live))
        self.live.remove(seq)
        self.bm.free(seq.table)

    @invariant()
    def bookkeeping_is_consistent(self) -> None:
        if hasattr(self, "bm"):
            self.bm.check_invariants([s.table for s in self.live])
            in_tables = {b for s in self.live for b in s.table}
            free = set(self.bm._free_plain) | set(self.bm._evictable)
            assert not (in_tables & free), "a block is both free and in a table"

    @invariant()
    def everything_returns_when_all_finish(self) -> None:
        if hasattr(self, "bm") and not self.live:
            assert self.bm.num_free_blocks == NUM_BLOCKS and self.bm.num_used == 0


BlockPoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestBlockPool = BlockPoolMachine.TestCase
