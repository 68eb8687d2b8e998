"""Parallel sampling (SamplingParams n, best_of): one request's samples share its prompt's KV blocks (forked
block tables, the partial last block copied on write), equal separate requests seeded with sample_seed(seed, i),
survive preemption, and give every block back when they finish or are aborted."""

from __future__ import annotations

import pytest

from engine_fixtures import random_prompt, tiny_llama, tiny_llm  # noqa: F401
from judge_engine import SamplingParams
from judge_engine.engine.block_manager import BlockManager
from judge_engine.engine.sampler import SEED_MAX, SEED_MIN, SamplingParamsError, sample_seed

PROMPT = random_prompt(7, 62)   # 15 full blocks of 4 and a partial one holding 2 tokens
N, MAX_TOKENS, SEED = 8, 8, 1234


def params(**overrides) -> SamplingParams:
    values = dict(temperature=0.9, top_k=50, max_tokens=MAX_TOKENS, ignore_eos=True, seed=SEED)
    values.update(overrides)
    return SamplingParams(**values)


def assert_all_blocks_back(llm) -> None:
    manager = llm.engine.block_manager
    assert manager.num_used == 0 and manager.num_free_blocks == manager.num_blocks
    manager.check_invariants([])


def test_n_samples_share_the_prompt_blocks_and_copy_only_the_partial_one(tiny_llama):
    # no prefix cache: whatever is shared is shared by the fork
    llm = tiny_llm(tiny_llama, blocks=256, enable_prefix_caching=False)
    [out] = llm.generate([PROMPT], params(n=N))
    assert len(out.outputs) == N and all(len(c.token_ids) == MAX_TOKENS for c in out.outputs)
    manager = llm.engine.block_manager
    full_prompt_blocks = len(PROMPT) // 4                                   # 15
    # the last sampled token is never computed: each sample's positions 0..len+MAX_TOKENS-2 are in the cache
    blocks_per_sample = -(-(len(PROMPT) + MAX_TOKENS - 1) // 4)             # 18
    own_blocks = blocks_per_sample - full_prompt_blocks                     # 3: the copied partial one + 2 tails
    assert manager.num_copied_blocks == N - 1   # the last sample to write keeps the original partial block
    assert llm.stats()["kv_blocks_peak"] == full_prompt_blocks + N * own_blocks == 39
    assert_all_blocks_back(llm)

    separate = tiny_llm(tiny_llama, blocks=256, enable_prefix_caching=False)
    separate.generate([PROMPT] * N, [params(seed=sample_seed(SEED, i)) for i in range(N)])
    assert separate.stats()["kv_blocks_peak"] == N * blocks_per_sample == 144


def test_samples_equal_separate_requests_seeded_with_the_derived_seeds(tiny_llama):
    llm = tiny_llm(tiny_llama)
    [out] = llm.generate([PROMPT], params(n=N, logprobs=1))
    separate = tiny_llm(tiny_llama).generate([PROMPT] * N, [params(seed=sample_seed(SEED, i), logprobs=1)
                                                            for i in range(N)])
    assert [c.token_ids for c in out.outputs] == [o.token_ids for o in separate]
    assert [c.text for c in out.outputs] == [o.text for o in separate]
    assert [c.logprobs for c in out.outputs] == [o.logprobs for o in separate]
    assert [c.cumulative_logprob for c in out.outputs] == [o.outputs[0].cumulative_logprob for o in separate]
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1   # the samples did diverge
    assert [c.index for c in out.outputs] == list(range(N))
    # the single-sample fields are the first sample's; usage counts every sample's tokens
    assert (out.token_ids, out.text, out.finish_reason) == (separate[0].token_ids, separate[0].text, "length")
    assert out.usage.output_tokens == N * MAX_TOKENS and out.usage.prompt_tokens == len(PROMPT)
    assert_all_blocks_back(llm)


def test_best_of_returns_the_n_most_likely_candidates(tiny_llama):
    llm = tiny_llm(tiny_llama)
    [out] = llm.generate([PROMPT], params(n=2, best_of=5))
    candidates = tiny_llm(tiny_llama).generate([PROMPT] * 5, [params(seed=sample_seed(SEED, i), logprobs=0)
                                                              for i in range(5)])
    ranked = sorted(candidates, key=lambda o: -o.outputs[0].cumulative_logprob)[:2]
    assert [c.token_ids for c in out.outputs] == [o.token_ids for o in ranked]
    assert out.outputs[0].cumulative_logprob > out.outputs[1].cumulative_logprob
    assert out.usage.output_tokens == 5 * MAX_TOKENS
    assert_all_blocks_back(llm)


def test_preempted_samples_are_recomputed_and_finish_the_same(tiny_llama):
    prompts = [random_prompt(30 + i, 9 + 3 * i) for i in range(3)]
    per_request = [params(n=4, seed=40 + i, max_tokens=10) for i in range(3)]
    expected = [[c.token_ids for c in o.outputs] for o in tiny_llm(tiny_llama).generate(prompts, per_request)]

    small = tiny_llm(tiny_llama, blocks=12, max_num_seqs=16)  # 48 slots for 12 samples of up to 25 tokens
    outs = small.generate(prompts, per_request)
    assert small.stats()["preemptions"] > 0
    assert small.engine.block_manager.num_copied_blocks > 0
    assert [[c.token_ids for c in o.outputs] for o in outs] == expected
    assert sum(o.metrics.num_preemptions for o in outs) == small.stats()["preemptions"]
    assert_all_blocks_back(small)


def test_aborting_a_forked_request_frees_every_sample(tiny_llama):
    llm = tiny_llm(tiny_llama, enable_prefix_caching=False)
    engine = llm.engine
    engine.add_request("a", PROMPT, params(n=4, max_tokens=20))
    engine.add_request("b", PROMPT[:9], params(max_tokens=3))
    for _ in range(4):
        engine.step()
    assert len(engine.scheduler.running) == 4   # "b" is done; "a" runs as four samples
    assert engine.block_manager.num_used > 0
    engine.abort_request("a")
    assert not engine.has_unfinished_requests() and not engine.scheduler.has_unfinished()
    assert_all_blocks_back(llm)


def test_streamed_samples_carry_their_own_increments(tiny_llama):
    engine = tiny_llm(tiny_llama).engine
    engine.add_request("s", PROMPT, params(n=3, max_tokens=6), stream=True)
    pieces = [[] for _ in range(3)]
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            for completion in out.outputs:
                pieces[completion.index].extend(completion.new_token_ids)
            final = out
    assert final.finished and [c.token_ids for c in final.outputs] == pieces
    assert all(len(p) == 6 for p in pieces)


def test_fork_shares_every_block_and_copies_a_shared_block_only_when_written():
    from judge_engine.engine.sequence import Sequence

    manager = BlockManager(num_blocks=8, block_size=4)
    parent = Sequence("r", list(range(3, 9)), SamplingParams())   # 6 tokens: one full block, one partial
    assert manager.allocate_slots(parent, 6, manager.computed_blocks(parent))
    manager.register_full_blocks(parent, 6)
    parent.num_computed_tokens = 6
    child = parent.fork(1, None)
    manager.fork(parent, child)
    assert manager.block_table(child) == manager.block_table(parent) and manager.num_used == 2
    manager.check_invariants()
    for seq in (parent, child):
        seq.token_ids.append(20 + seq.sample_index)
    assert manager.allocate_slots(parent, 1)           # writes position 6, in the shared partial block
    [(source, copy)] = manager.take_copies()
    assert manager.block_table(parent)[1] == copy and manager.block_table(child)[1] == source
    assert manager.allocate_slots(child, 1) and manager.take_copies() == []   # the last owner writes in place
    assert manager.block_table(parent)[0] == manager.block_table(child)[0]    # the full block stays shared
    manager.check_invariants()
    manager.free_sequence(parent)
    manager.free_sequence(child)
    assert manager.num_used == 0
    manager.check_invariants([])


def test_a_failed_copy_on_write_keeps_the_shared_block():
    from judge_engine.engine.sequence import Sequence

    manager = BlockManager(num_blocks=2, block_size=4)
    parent = Sequence("r", [3, 4, 5, 6, 7, 8], SamplingParams())
    assert manager.allocate_slots(parent, 6, manager.computed_blocks(parent))
    parent.num_computed_tokens = 6
    child = parent.fork(1, None)
    manager.fork(parent, child)
    table = list(manager.block_table(parent))
    assert not manager.allocate_slots(parent, 1)      # no free block to copy into
    assert manager.block_table(parent) == table and manager.take_copies() == []
    manager.check_invariants()


def test_sample_seeds_wrap_in_the_signed_64_bit_range():
    assert sample_seed(5, 0) == 5 and sample_seed(5, 3) == 8
    assert sample_seed(SEED_MAX, 1) == SEED_MIN and sample_seed(-1, 1) == 0


@pytest.mark.parametrize("bad", [dict(n=0), dict(n=3, best_of=2), dict(n=1.5), dict(n=2, return_logits=True)])
def test_invalid_sample_counts_are_refused(bad):
    with pytest.raises(SamplingParamsError):
        SamplingParams(**bad)


def test_defaults_keep_one_sample():
    p = SamplingParams()
    assert (p.n, p.best_of) == (1, 1)
