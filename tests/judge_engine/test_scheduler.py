"""Scheduler decisions, driven without a model: a fake step appends a token derived from the sequence."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from judge_engine.engine.block_manager import BlockManager
from judge_engine.engine.sampler import SamplingParams
from judge_engine.engine.scheduler import Scheduler
from judge_engine.engine.sequence import Sequence, SequenceStatus
from judge_engine.engine.stats import EngineStats

BS = 4


def make(num_blocks=64, max_num_seqs=8, max_tokens_per_step=32, prefix_caching=True,
         long_prefill_tokens=64) -> Scheduler:
    bm = BlockManager(num_blocks, BS, prefix_caching)
    return Scheduler(bm, max_num_seqs, max_tokens_per_step, EngineStats(kv_blocks_total=num_blocks, block_size=BS),
                     long_prefill_tokens=long_prefill_tokens)


def seq(tokens: list[int], max_tokens: int = 3, name: str = "r") -> Sequence:
    return Sequence(name, list(tokens), SamplingParams(temperature=0.0, max_tokens=max_tokens))


def fake_step(scheduler: Scheduler):
    """One engine step without a model; returns the scheduler output."""
    out = scheduler.schedule()
    scheduler.step_done(out)
    for item in out.scheduled:
        s = item.seq
        if item.end == s.num_tokens:
            if s.wants_next_token:
                s.token_ids.append(sum(s.token_ids) % 7 + 1)  # depends on the whole sequence, like a model
            if not s.wants_next_token:
                scheduler.finish(s)
    bm = scheduler.block_manager
    bm.check_invariants([bm.block_table(s) for s in scheduler.running])
    return out


def run_all(scheduler: Scheduler, max_steps: int = 1000) -> list:
    outs = []
    while scheduler.has_unfinished():
        outs.append(fake_step(scheduler))
        assert len(outs) < max_steps, "no progress"
    return outs


def test_token_budget_and_sequence_cap_hold_every_step():
    sch = make(max_num_seqs=3, max_tokens_per_step=10)
    for i in range(6):
        sch.add(seq(list(range(1, 8 + i)), name=f"r{i}"))
    for out in run_all(sch):
        assert out.num_batched_tokens <= 10
        assert len(out.scheduled) <= 3


def test_long_prompt_is_prefilled_in_chunks():
    sch = make(max_tokens_per_step=8)
    s = seq(list(range(1, 21)), max_tokens=1)
    sch.add(s)
    outs = run_all(sch)
    chunks = [(o.scheduled[0].start, o.scheduled[0].num_new_tokens) for o in outs]
    assert chunks == [(0, 8), (8, 8), (16, 4)]
    assert s.num_output_tokens == 1


def test_decodes_and_prefills_share_a_step():
    sch = make(max_tokens_per_step=16)
    a = seq([1, 2, 3], max_tokens=5, name="a")
    sch.add(a)
    fake_step(sch)  # a's prefill
    sch.add(seq(list(range(1, 21)), name="b"))
    out = fake_step(sch)
    assert [(i.seq.request_id, i.num_new_tokens) for i in out.scheduled] == [("a", 1), ("b", 15)]


def test_second_sequence_shares_the_prefix_blocks_computed_in_the_same_step():
    sch = make()
    shared = list(range(1, 13))  # three full blocks
    first, second = seq(shared + [20, 21], name="first"), seq(shared + [30], name="second")
    sch.add(first)
    sch.add(second)
    out = fake_step(sch)
    assert [(i.seq.request_id, i.start, i.num_new_tokens) for i in out.scheduled] == [
        ("first", 0, 14), ("second", 12, 1)]
    table = sch.block_manager.block_table
    assert second.num_cached_tokens == 12 and table(second)[:3] == table(first)[:3]
    assert sch.stats.cached_prompt_tokens == 12
    assert sch.stats.computed_prompt_tokens == 14 + 1
    sch.block_manager.check_invariants([table(first), table(second)])


def test_sharing_a_prefix_does_not_block_unrelated_requests():
    sch = make()
    shared = list(range(1, 13))
    sch.add(seq(shared + [20], name="a"))
    sch.add(seq(shared + [21], name="b"))
    sch.add(seq([5, 5, 5, 5, 5], name="c"))
    out = fake_step(sch)
    assert [i.seq.request_id for i in out.scheduled] == ["a", "b", "c"]
    assert not sch.waiting


def test_prefix_cache_hit_across_batches_after_release():
    sch = make()
    shared = list(range(1, 13))
    sch.add(seq(shared + [1], name="a"))
    run_all(sch)
    later = seq(shared + [2, 3], name="b")
    sch.add(later)
    run_all(sch)
    assert later.num_cached_tokens == 12


def test_cached_prefix_never_covers_the_logits_positions():
    sch = make()
    shared = list(range(1, 13))
    sch.add(seq(shared + [1], name="a"))
    run_all(sch)
    scored = Sequence("s", shared + [9, 9], SamplingParams(max_tokens=0), logprobs_from=12)
    sch.add(scored)
    out = fake_step(sch)
    assert out.scheduled[0].start == 8  # position 11 (predicting token 12) must be computed
    assert scored.needs_logits_rows(8, 14) == [11, 12]


def test_preemption_when_blocks_run_out_and_everything_finishes():
    sch = make(num_blocks=6, max_num_seqs=4, max_tokens_per_step=64)
    seqs = [seq([i + 1] * 6, max_tokens=6, name=f"r{i}") for i in range(4)]
    for s in seqs:
        sch.add(s)
    run_all(sch)
    assert sch.stats.preemptions > 0
    assert all(s.num_output_tokens == 6 for s in seqs)
    assert sch.block_manager.num_free_blocks == 6 and sch.block_manager.num_used == 0


@pytest.mark.parametrize("prefix_caching", [True, False])
def test_outputs_do_not_depend_on_cache_size(prefix_caching):
    def outputs(num_blocks):
        sch = make(num_blocks=num_blocks, max_num_seqs=8, max_tokens_per_step=24, prefix_caching=prefix_caching)
        seqs = [seq([1, 2, 3, 4, 5, 6] + [i % 3 + 1] * (i % 5 + 1), max_tokens=5, name=f"r{i}") for i in range(12)]
        for s in seqs:
            sch.add(s)
        run_all(sch)
        assert sch.block_manager.num_free_blocks == num_blocks
        return [s.token_ids for s in seqs], sch.stats.preemptions

    big, big_preemptions = outputs(200)
    small, small_preemptions = outputs(5)
    assert small == big
    assert big_preemptions == 0 and small_preemptions > 0


def test_finish_of_a_waiting_sequence_removes_it():
    sch = make()
    s = seq([1, 2, 3])
    sch.add(s)
    sch.finish(s)
    assert not sch.has_unfinished() and s.status is SequenceStatus.FINISHED


def test_usage_peak_is_recorded():
    sch = make(max_tokens_per_step=64)
    sch.add(seq(list(range(1, 11)), max_tokens=1, name="a"))  # 10 tokens: 3 blocks, 2 slots unused
    run_all(sch)
    assert sch.stats.kv_blocks_peak == 3
    assert sch.stats.kv_slots_unused_at_peak == 2


@settings(max_examples=60, deadline=None)
@given(
    prompts=st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(1, 6), min_size=1, max_size=9)),
                     min_size=1, max_size=10),
    max_tokens=st.integers(0, 6),
    num_blocks=st.integers(6, 12),  # the longest sequence (8 + 9 + 6 tokens) needs 6 blocks
    budget=st.integers(1, 20),
    max_num_seqs=st.integers(1, 5),
)
def test_random_workloads_finish_like_an_unconstrained_run(prompts, max_tokens, num_blocks, budget, max_num_seqs):
    prefixes = [[], [7, 7, 7, 7], [7, 7, 7, 7, 8, 8, 8, 8]]
    token_lists = [prefixes[p] + own for p, own in prompts]

    def run(blocks, step_budget, seqs_cap):
        sch = make(num_blocks=blocks, max_num_seqs=seqs_cap, max_tokens_per_step=step_budget)
        seqs = [seq(tokens, max_tokens=max_tokens, name=f"r{i}") for i, tokens in enumerate(token_lists)]
        for s in seqs:
            sch.add(s)
        for out in run_all(sch):
            assert out.num_batched_tokens <= step_budget and len(out.scheduled) <= seqs_cap
        assert sch.block_manager.num_free_blocks == blocks and sch.block_manager.num_used == 0
        return [s.token_ids for s in seqs]

    assert run(num_blocks, budget, max_num_seqs) == run(200, 1000, 100)


# ------------------------------------------------------------------------------------------ sharing a step


def test_share_step_gives_short_ones_their_all_and_splits_the_rest_evenly():
    from judge_engine.engine.step_budget import share_step

    assert share_step([100, 1, 3], room=32, long_prefill_tokens=8, serves_short_request=True) == [8, 1, 3]
    assert share_step([100, 1, 3], room=32, long_prefill_tokens=8) == [28, 1, 3]       # judge tails: the step fills
    assert share_step([100, 100], room=32, long_prefill_tokens=8) == [16, 16]          # two long ones side by side
    assert share_step([100, 5], room=32, long_prefill_tokens=4) == [27, 5]             # 5 > 4: both long, 5 fits
    assert share_step([100, 100], room=32, long_prefill_tokens=8, serves_short_request=True) == [8, 8]
    assert share_step([100], room=20, long_prefill_tokens=8) == [20]                   # alone: the whole room
    assert share_step([0, 2, 40], room=3, long_prefill_tokens=8) == [0, 2, 1]
    assert sum(share_step([7, 9, 50, 60], room=31, long_prefill_tokens=8)) <= 31
    # deep in a prompt a token costs its attention too: at 3,000 tokens in, with break-even 1,000, four times
    assert share_step([1000], room=100, long_prefill_tokens=64, positions=[3000], break_even=1000) == [25]
    assert share_step([1000], room=100, long_prefill_tokens=64, positions=[0], break_even=1000) == [100]
    assert share_step([1000, 1], room=100, long_prefill_tokens=64, serves_short_request=True, positions=[3000, 5],
                      break_even=1000) == [16, 1]


def test_the_attention_break_even_of_the_served_models():
    import dataclasses

    from judge_engine.engine.step_budget import attention_break_even
    from judge_engine.loading.loader import ModelSpec
    from judge_engine.models.config import LlamaFamilyConfig

    smollm2_135m = LlamaFamilyConfig.from_dict({
        "architectures": ["LlamaForCausalLM"], "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "rms_norm_eps": 1e-5,
        "max_position_embeddings": 8192})
    spec = ModelSpec.from_config(smollm2_135m)
    assert attention_break_even(spec) == 3072
    assert spec.layer_weights() == 3_538_944  # 576 x (2 x 576 + 2 x 192) + 3 x 576 x 1536
    assert attention_break_even(dataclasses.replace(spec, intermediate_size=None)) is None


def test_a_short_request_is_not_stuck_behind_a_long_prompt():
    """One client's 200-token prompt filled every step until it was computed; another's 3-token request waited
    for all of it. Now the short one starts at the next step and each step it shares stays short."""
    sch = make(num_blocks=128, max_tokens_per_step=32, long_prefill_tokens=8)
    long = seq([(i % 50) + 1 for i in range(200)], max_tokens=1, name="long")
    sch.add(long)
    fake_step(sch)
    short = seq([91, 92, 93], max_tokens=3, name="short")
    sch.add(short)
    steps_for_short = 0
    while not short.is_finished:
        out = fake_step(sch)
        steps_for_short += 1
        tokens = {item.seq.request_id: item.num_new_tokens for item in out.scheduled}
        assert tokens.get("long", 0) <= 8   # the steps the short one shares are short
    assert steps_for_short == 3             # its prompt, then two decodes
    run_all(sch)
    assert long.num_output_tokens == 1


def test_prompts_waiting_on_a_long_prefix_being_computed_wait_for_it_and_nothing_is_computed_twice():
    """With room left in a step (a decode beside a long prompt), a waiting prompt that shares the long prompt's
    prefix is not admitted to compute that prefix a second time: it waits for the blocks, then takes them."""
    sch = make(num_blocks=256, max_num_seqs=16, max_tokens_per_step=32, long_prefill_tokens=8)
    decoding = seq([7, 7, 7], max_tokens=60, name="decoding")
    sch.add(decoding)
    fake_step(sch)
    prefix = [(i % 40) + 1 for i in range(96)]
    for i in range(5):
        sch.add(seq(prefix + [60 + i, 61, 62], max_tokens=1, name=f"item{i}"))
    run_all(sch)
    # the prefix once (96 tokens), each item's tail and its partial last block: 5 x (3 + 3), and the decoding prompt
    assert sch.stats.computed_prompt_tokens <= 96 + 5 * 6 + 3


def test_an_unrelated_newcomer_starts_beside_a_long_prompt_and_the_long_one_keeps_going():
    sch = make(num_blocks=256, max_tokens_per_step=32, long_prefill_tokens=8)
    long = seq([(i % 50) + 1 for i in range(160)], max_tokens=1, name="long")
    sch.add(long)
    fake_step(sch)
    other = seq([(i % 30) + 51 for i in range(60)], max_tokens=1, name="other")   # long too, another prefix
    sch.add(other)
    out = fake_step(sch)
    tokens = {item.seq.request_id: item.num_new_tokens for item in out.scheduled}
    assert tokens["long"] > 0 and tokens["other"] > 0 and sum(tokens.values()) == 32
    run_all(sch)
    assert long.num_output_tokens == 1 and other.num_output_tokens == 1
