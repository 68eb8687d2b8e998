"""Per-step scheduling: which sequences run and how many of their tokens, under a token budget and a sequence cap.

Running sequences go first, in admission order (a decode costs one token, an unfinished prefill continues with
its next chunk), sharing the step's budget as step_budget.py says: short ones whole, long prompts evenly, a long
prompt in small chunks while a short request shares its step, and room kept for newcomers that could start now.
Then waiting ones are admitted first come first served, each taking what the prefix cache holds and a chunk of
the rest; one whose next block of prompt a running sequence is still computing waits for it (admitted now, it
would compute that block a second time), and the ones behind it may go first. When a running sequence needs a
block and none is free, the most recently admitted sequence is preempted: its blocks are released and it is
recomputed later (its computed full blocks stay in the prefix cache, so the recompute is mostly cache hits). A
waiting sequence whose prefix is being computed by a sequence scheduled earlier in the same step shares those
blocks at once: the judge's criteria of one trajectory all run in the step that computes their shared prefix,
and nothing is computed twice.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import islice

from judge_engine.engine.block_manager import BlockManager
from judge_engine.engine.sequence import Sequence, SequenceStatus
from judge_engine.engine.stats import EngineStats
from judge_engine.engine.step_budget import SHORT_REQUEST_CHUNKS, share_step

# How many waiting sequences a step passes over (or looks at, for room to keep) to find newcomers that can start
# at once: each costs a prefix match.
NEWCOMER_WINDOW = 16


@dataclass
class ScheduledSequence:
    seq: Sequence
    start: int          # first position computed this step (= tokens already in the cache)
    num_new_tokens: int
    block_table: list[int]  # the sequence's blocks for this step, as the block manager holds them

    @property
    def end(self) -> int:
        return self.start + self.num_new_tokens


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSequence] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    blocks_to_copy: list[tuple[int, int]] = field(default_factory=list)  # (source, destination), before the run

    @property
    def num_batched_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int,
                 stats: EngineStats, *, long_prefill_tokens: int, sliding_window: int | None = None,
                 break_even: int | None = None) -> None:
        """long_prefill_tokens: what a long prompt computes in a step it shares with a short request (the
        engine's config); sliding_window: every layer of the model attends only this many keys (blocks left of
        it are freed); break_even: the context length at which a token's attention costs its linear maps, to
        count deep tokens at their cost (step_budget.py)."""
        self.block_manager = block_manager
        self.sliding_window = sliding_window
        self.block_size = block_manager.block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.long_prefill_tokens = long_prefill_tokens
        self.break_even = break_even
        self.stats = stats
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def fork(self, parent: Sequence, children: list[Sequence]) -> None:
        """Siblings of `parent` (samples of its request, beams) that share its blocks and run right after it; a
        parent waiting to be recomputed (preempted) gets siblings that wait, and recompute, with it."""
        if parent.status is SequenceStatus.RUNNING:
            for child in children:
                self.block_manager.fork(parent, child)
            at = self.running.index(parent) + 1
            self.running[at:at] = children
        else:
            at = self.waiting.index(parent) + 1
            for offset, child in enumerate(children):
                child.status, child.num_computed_tokens = SequenceStatus.WAITING, 0
                self.waiting.insert(at + offset, child)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def finish(self, seq: Sequence) -> None:
        """Remove a sequence that finished or was aborted, releasing its blocks."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SequenceStatus.WAITING and seq in self.waiting:
            self.waiting.remove(seq)
        self._release(seq)
        seq.status = SequenceStatus.FINISHED

    # -- one step -------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        shares = self._shares()
        budget = self._schedule_running(out, shares)
        if not out.preempted:
            self._admit_waiting(out, budget)
        out.blocks_to_copy = self.block_manager.take_copies()
        self._record_usage(out)
        return out

    def _shares(self) -> dict[int, int]:
        """Tokens each running sequence may compute this step (by id), after room for the newcomers that can
        start now, when the running ones alone would fill the budget."""
        budget = self.max_num_batched_tokens
        demands = [seq.num_tokens - seq.num_computed_tokens for seq in self.running]
        newcomers = self._newcomers() if sum(demands) >= budget else []
        room = budget - min(sum(need for _, need in newcomers), budget // 2)
        active = [(seq, need) for seq, need in zip(self.running, demands) if need] + newcomers
        # a short request beside others: a lone prompt's own last chunks are nobody's reason to go slowly
        serves_short_request = len(active) > 1 and any(self._is_short_request(seq, need) for seq, need in active)
        positions = [seq.num_computed_tokens for seq in self.running]
        shares = share_step(demands, room, self.long_prefill_tokens, serves_short_request, positions, self.break_even)
        return {id(seq): share for seq, share in zip(self.running, shares)}

    def _is_short_request(self, seq: Sequence, need: int) -> bool:
        """Decoding, or with little prompt left to compute: a request whose steps should stay short."""
        decoding = seq.num_computed_tokens >= seq.num_prompt_tokens
        return decoding or need <= SHORT_REQUEST_CHUNKS * self.long_prefill_tokens

    def _newcomers(self) -> list[tuple[Sequence, int]]:
        """The waiting sequences (near the front) that could start this step, with their uncached tokens."""
        if len(self.running) >= self.max_num_seqs:
            return []
        newcomers = []
        for seq in islice(self.waiting, NEWCOMER_WINDOW):
            cached = self.block_manager.computed_blocks(seq).num_tokens(self.block_size)
            if not self._waits_for_running_prefill(seq, cached, {}):
                newcomers.append((seq, seq.num_tokens - cached))
        return newcomers

    def _waits_for_running_prefill(self, seq: Sequence, cached: int, scheduled_end: dict[int, int]) -> bool:
        """Whether a running sequence will compute, after this step, a full block that `seq` would otherwise
        compute itself: the block after its `cached` tokens, shared with that sequence's prompt."""
        bs = self.block_size
        if seq.num_tokens - cached < bs:
            return False
        for other in self.running:
            done = scheduled_end.get(id(other), other.num_computed_tokens)
            if done >= other.num_prompt_tokens or done >= cached + bs:
                continue   # its prompt is computed (or that block is, and the cache would have served it)
            if other.num_prompt_tokens >= cached + bs and other.token_ids[:cached + bs] == seq.token_ids[:cached + bs]:
                return True
        return False

    def _schedule_running(self, out: SchedulerOutput, shares: dict[int, int]) -> int:
        budget = self.max_num_batched_tokens
        index = 0
        while index < len(self.running) and budget > 0:
            seq = self.running[index]
            n = min(seq.num_tokens - seq.num_computed_tokens, shares.get(id(seq), 0), budget)
            if n == 0:  # a beam waiting for its siblings' next-token rows, or no share this step
                index += 1
                continue
            while not self.block_manager.allocate_slots(seq, n):
                victim = self.running.pop()  # the most recently admitted one is the cheapest to lose
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is seq:
                    break
            if seq.status is not SequenceStatus.RUNNING:
                break  # it preempted itself: everything after it is gone too
            self._schedule(out, seq, n)
            budget -= n
            index += 1
        return budget

    def _admit_waiting(self, out: SchedulerOutput, budget: int) -> None:
        scheduled_end = {id(item.seq): item.end for item in out.scheduled}
        passed_over = 0
        for seq in list(self.waiting):
            if budget <= 0 or len(self.running) >= self.max_num_seqs or passed_over >= NEWCOMER_WINDOW:
                break
            computed = self.block_manager.computed_blocks(seq)
            num_cached = computed.num_tokens(self.block_size)
            if self._waits_for_running_prefill(seq, num_cached, scheduled_end):
                passed_over += 1
                continue
            n = min(seq.num_tokens - num_cached, budget)
            if not self.block_manager.allocate_slots(seq, n, computed):
                break
            self.waiting.remove(seq)
            if seq.num_preemptions == 0:
                seq.num_cached_tokens = num_cached
                self.stats.cached_prompt_tokens += num_cached
            seq.num_computed_tokens = num_cached
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            self._schedule(out, seq, n)
            scheduled_end[id(seq)] = num_cached + n
            budget -= n

    def _schedule(self, out: SchedulerOutput, seq: Sequence, n: int) -> None:
        start = seq.num_computed_tokens
        out.scheduled.append(ScheduledSequence(seq, start, n, self.block_manager.block_table(seq)))
        self.block_manager.register_full_blocks(seq, start + n)

    def _preempt(self, seq: Sequence) -> None:
        self._release(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(seq)

    def _release(self, seq: Sequence) -> None:
        self.block_manager.free_sequence(seq)
        seq.num_computed_tokens = 0

    # -- after the step ran ---------------------------------------------------------------------------
    def step_done(self, out: SchedulerOutput) -> None:
        """The step's keys and values are in the cache: its blocks can be served to others."""
        for item in out.scheduled:
            seq = item.seq
            self.block_manager.mark_computed(seq, item.start, item.end)
            seq.num_computed_tokens = item.end
            if self.sliding_window is not None:
                self.block_manager.free_blocks_outside_window(seq, self.sliding_window)
            self.stats.attention_pairs += (item.end * (item.end + 1) - item.start * (item.start + 1)) // 2
            if item.start < seq.num_prompt_tokens:
                prompt_part = min(item.end, seq.num_prompt_tokens) - item.start
                if seq.num_preemptions == 0:
                    self.stats.computed_prompt_tokens += prompt_part
                else:
                    self.stats.recomputed_tokens += item.num_new_tokens

    def _record_usage(self, out: SchedulerOutput) -> None:
        used_blocks = self.block_manager.num_used
        if used_blocks > self.stats.kv_blocks_peak:
            self.stats.kv_blocks_peak = used_blocks
            # slots allocated but holding no token at this peak: the tail of each sequence's last block
            unused = sum(len(self.block_manager.block_table(s)) * self.block_size - (s.num_computed_tokens + n)
                         for s, n in self._tokens_after_step(out))
            self.stats.kv_slots_unused_at_peak = unused
            self.stats.kv_seqs_at_peak = len(self.running)

    def _tokens_after_step(self, out: SchedulerOutput):
        new = {id(item.seq): item.num_new_tokens for item in out.scheduled}
        return [(seq, new.get(id(seq), 0)) for seq in self.running]
