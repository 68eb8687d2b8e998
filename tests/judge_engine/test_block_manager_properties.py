"""Stateful property test of the block pool: random sequences with shared prefixes grow, finish, get
preempted, with hash collisions forced on some runs, and the bookkeeping never goes wrong."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from judge_engine.engine import block_manager as bm_module
from judge_engine.engine.block_manager import BlockManager
from judge_engine.engine.sampler import SamplingParams
from judge_engine.engine.sequence import Sequence

BS = 4
NUM_BLOCKS = 12
PREFIXES = [[1] * 8, [1] * 4 + [2] * 4, [3] * 6]  # overlapping prefixes so that hits and partial hits happen


def live_sequence(number: int, tokens: list[int]) -> Sequence:
    return Sequence(f"s{number}", tokens, SamplingParams(max_tokens=1))


class BlockPoolMachine(RuleBasedStateMachine):
    @initialize(collide=st.booleans())
    def setup(self, collide: bool) -> None:
        self._original_hash = bm_module.block_hash
        if collide:  # every block under a handful of hashes: only verification keeps the cache correct
            bm_module.block_hash = lambda parent, tokens: sum(tokens) % 3
        self.bm = BlockManager(NUM_BLOCKS, BS)
        self.live: list[Sequence] = []
        self.admitted = 0
        # what each block's cache content really is: the token prefix it was computed for
        self.content: dict[int, tuple[int, ...]] = {}
        # what a registered block will hold once the step that fills it has run
        self.intended: dict[int, tuple[int, ...]] = {}

    def teardown(self) -> None:
        if hasattr(self, "_original_hash"):
            bm_module.block_hash = self._original_hash

    @rule(prefix=st.sampled_from(PREFIXES), suffix=st.lists(st.integers(1, 3), max_size=9))
    def admit(self, prefix: list[int], suffix: list[int]) -> None:
        self.admitted += 1
        seq = live_sequence(self.admitted, prefix + suffix)
        computed = self.bm.computed_blocks(seq)
        for index, block_id in enumerate(computed.block_ids):
            # a hit must hold (or, filled by the step being scheduled, will hold) exactly this prefix
            holds = self.content if self.bm.blocks[block_id].computed else self.intended
            assert holds[block_id] == tuple(seq.token_ids[:(index + 1) * BS])
        num_cached = computed.num_tokens(BS)
        if not self.bm.allocate_slots(seq, seq.num_tokens - num_cached, computed):
            assert self.bm.block_table(seq) == []
            return
        seq.num_computed_tokens = num_cached
        self._register(seq)
        self.live.append(seq)
        if computed.pending:  # admitted into the step that fills its hits: that step runs before anything else
            for other in self.live:
                self._run(other)

    def _register(self, seq: Sequence) -> None:
        hashes = self.bm._sequences[seq].hashes  # the chain, to tell which new blocks got indexed
        first_new = len(hashes)
        self.bm.register_full_blocks(seq, seq.num_tokens)
        table = self.bm.block_table(seq)
        for index in range(first_new, len(hashes)):
            if self.bm.blocks[table[index]].hash == hashes[index]:
                self.intended[table[index]] = tuple(seq.token_ids[:(index + 1) * BS])

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def run_step(self, data) -> None:
        self._run(data.draw(st.sampled_from(self.live)))

    def _run(self, seq: Sequence) -> None:
        table = self.bm.block_table(seq)
        for index in range(seq.num_computed_tokens // BS, len(table)):
            if (index + 1) * BS <= seq.num_tokens:
                self.content[table[index]] = tuple(seq.token_ids[:(index + 1) * BS])
        self.bm.mark_computed(seq, seq.num_computed_tokens, seq.num_tokens)
        seq.num_computed_tokens = seq.num_tokens

    @precondition(lambda self: self.live)
    @rule(data=st.data(), token=st.integers(1, 3))
    def grow(self, data, token: int) -> None:
        seq = data.draw(st.sampled_from(self.live))
        if seq.num_computed_tokens < seq.num_tokens:
            return
        if not self.bm.allocate_slots(seq, 1):
            return
        seq.token_ids.append(token)
        self._register(seq)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def release(self, data) -> None:
        seq = data.draw(st.sampled_from(self.live))
        self.live.remove(seq)
        self.bm.free_sequence(seq)

    @invariant()
    def bookkeeping_is_consistent(self) -> None:
        if hasattr(self, "bm"):
            self.bm.check_invariants()
            self.bm.check_invariants([self.bm.block_table(s) for s in self.live])
            in_tables = {b for s in self.live for b in self.bm.block_table(s)}
            free = set(self.bm._free_plain) | set(self.bm._evictable)
            assert not (in_tables & free), "a block is both free and in a table"

    @invariant()
    def everything_returns_when_all_finish(self) -> None:
        if hasattr(self, "bm") and not self.live:
            assert self.bm.num_free_blocks == NUM_BLOCKS and self.bm.num_used == 0


BlockPoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestBlockPool = BlockPoolMachine.TestCase
