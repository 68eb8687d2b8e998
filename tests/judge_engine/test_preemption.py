"""Running out of KV blocks never crashes: requests are preempted, recomputed, and finish with the same
outputs as with a big cache; a prompt that can never fit gets its own error."""

from __future__ import annotations

from engine_fixtures import random_prompt, tiny_llama, tiny_llm  # noqa: F401
from judge_engine import SamplingParams


def workload() -> tuple[list[list[int]], list[SamplingParams]]:
    shared = random_prompt(99, 8)
    prompts, params = [], []
    for i in range(50):
        own = random_prompt(100 + i, 4 + i % 9)
        prompts.append(shared + own if i % 3 == 0 else own)  # some share a two-block prefix
        if i % 4 == 0:
            params.append(SamplingParams(temperature=0.8, top_k=20, seed=i, max_tokens=8, ignore_eos=True))
        else:
            params.append(SamplingParams(temperature=0.0, max_tokens=4 + i % 5, ignore_eos=True))
    return prompts, params


def test_fifty_requests_through_a_few_blocks_match_a_big_cache(tiny_llama):
    prompts, params = workload()
    big = tiny_llm(tiny_llama, blocks=512)
    expected = [o.token_ids for o in big.generate(prompts, params)]
    assert big.stats()["preemptions"] == 0

    small = tiny_llm(tiny_llama, blocks=8, max_num_seqs=16)  # 32 slots; the longest request needs 28
    outs = small.generate(prompts, params)
    stats = small.stats()
    assert stats["preemptions"] > 0
    assert [o.token_ids for o in outs] == expected
    assert all(o.finish_reason == "length" for o in outs)
    assert small.engine.block_manager.num_used == 0
    assert small.engine.block_manager.num_free_blocks == 8
    small.engine.block_manager.check_invariants([])


def test_prompt_bigger_than_the_cache_fails_alone(tiny_llama):
    llm = tiny_llm(tiny_llama, blocks=8)
    prompts = [random_prompt(200, 10), random_prompt(201, 40), random_prompt(202, 12)]
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True))
    assert outs[1].finish_reason == "error" and "KV cache" in outs[1].error
    assert [len(outs[i].token_ids) for i in (0, 2)] == [4, 4]
    scores = llm.score(prompts, [" yes"])
    assert isinstance(scores[0], list) and isinstance(scores[2], list)
    assert "KV cache" in str(scores[1])
