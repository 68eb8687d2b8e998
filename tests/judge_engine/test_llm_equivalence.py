"""The engine's logits equal transformers' own model on the same weights (float32, within 1e-3), whatever
the batching: single prompts, ragged batches, prefix-cache hits, chunked prefill, decode, preemption."""

from __future__ import annotations

import pytest

from engine_fixtures import hf_logits, random_prompt, tiny_llama, tiny_llm, tiny_qwen2  # noqa: F401
from judge_engine import SamplingParams

ATOL = 1e-3


def all_positions(max_tokens: int = 1) -> SamplingParams:
    """Logits at every prompt position and each generated one (prompt_logprobs turns the cache off for them)."""
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, prompt_logprobs=0, return_logits=True,
                          ignore_eos=True)


def assert_matches_reference(folder, out) -> None:
    full = out.prompt_token_ids + out.token_ids
    reference = hf_logits(folder, full)
    assert out.logits is not None and len(out.logits_positions) == len(out.logits)
    error = (out.logits - reference[out.logits_positions]).abs().max().item()
    assert error < ATOL, f"max |logit difference| {error}"


@pytest.mark.parametrize("family_fixture", ["tiny_llama", "tiny_qwen2"])
def test_single_prompt(family_fixture, request):
    folder = request.getfixturevalue(family_fixture)
    llm = tiny_llm(folder)
    prompt = random_prompt(1, 37)
    [out] = llm.generate([prompt], all_positions())
    assert out.logits_positions == list(range(37))
    assert_matches_reference(folder, out)


def test_ragged_batch_in_one_step(tiny_llama):
    llm = tiny_llm(tiny_llama)
    prompts = [random_prompt(seed, n) for seed, n in enumerate([5, 17, 40, 9, 1])]
    outs = llm.generate(prompts, all_positions(max_tokens=3))
    assert llm.stats()["steps"] == 3  # every prefill in the first step, then two batched decodes
    for out in outs:
        assert_matches_reference(tiny_llama, out)


def test_prompts_that_hit_the_prefix_cache(tiny_llama):
    llm = tiny_llm(tiny_llama)
    shared = random_prompt(2, 30)
    llm.generate([shared + [7, 8]], SamplingParams(temperature=0.0, max_tokens=1))
    params = SamplingParams(temperature=0.0, max_tokens=4, return_logits=True, ignore_eos=True)
    outs = llm.generate([shared + random_prompt(3, 5), shared + [9]], params)
    for out in outs:
        assert out.metrics.num_cached_tokens == 28  # 7 full blocks of 4 served by the cache
        assert out.logits_positions[0] == len(out.prompt_token_ids) - 1
        assert_matches_reference(tiny_llama, out)


def test_chunked_prefill_across_chunk_boundaries(tiny_llama):
    llm = tiny_llm(tiny_llama, max_num_batched_tokens=7)  # chunks end inside blocks of 4
    prompts = [random_prompt(4, 23), random_prompt(5, 11)]
    outs = llm.generate(prompts, all_positions(max_tokens=2))
    assert llm.stats()["steps"] >= 5
    for out in outs:
        assert_matches_reference(tiny_llama, out)


def test_decode_after_prefill(tiny_llama):
    llm = tiny_llm(tiny_llama)
    params = SamplingParams(temperature=0.0, max_tokens=12, return_logits=True, ignore_eos=True)
    [out] = llm.generate([random_prompt(6, 13)], params)
    assert out.logits_positions == list(range(12, 24))
    assert_matches_reference(tiny_llama, out)


def test_sampled_decode_matches_reference_too(tiny_llama):
    llm = tiny_llm(tiny_llama)
    params = SamplingParams(temperature=0.9, top_p=0.9, seed=11, max_tokens=8, return_logits=True,
                            ignore_eos=True)
    [out] = llm.generate([random_prompt(7, 9)], params)
    assert_matches_reference(tiny_llama, out)


def test_preempted_and_recomputed_sequences(tiny_llama):
    llm = tiny_llm(tiny_llama, blocks=12, max_num_seqs=6)
    params = SamplingParams(temperature=0.0, max_tokens=10, return_logits=True, ignore_eos=True)
    outs = llm.generate([random_prompt(10 + i, 9 + i) for i in range(6)], params)
    assert llm.stats()["preemptions"] > 0
    assert any(out.metrics.num_preemptions for out in outs)
    for out in outs:
        assert len(out.token_ids) == 10
        assert_matches_reference(tiny_llama, out)


@pytest.mark.slow
def test_embedded_model_logits_match_transformers():
    from judge_engine import LLM
    from judge_engine.loading.loader import model_folder

    llm = LLM(dtype="float32")   # transformers' reference computes in float32
    messages = [{"role": "user", "content": "Did the report flag the two unapproved expenses? Answer yes or no."}]
    prompt = llm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    [first] = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=1))  # fills the prefix cache
    [out] = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=6, return_logits=True,
                                                  ignore_eos=True))
    assert out.metrics.num_cached_tokens > 0
    assert_matches_reference(model_folder(llm.model_path), out)
