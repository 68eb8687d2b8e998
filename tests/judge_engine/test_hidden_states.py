"""Hidden states from LLM.score_with_usage(hidden_layers=..., hidden_positions=...): transformers' output_hidden_states
at the asked layers and prompt positions, bit for bit the same alone, in a batch, behind a prefix hit, chunked and
recomputed after a preemption, without changing any score."""

from __future__ import annotations

import pytest
import torch

from engine_fixtures import (hf_model, random_prompt, tiny_gemma2, tiny_llama, tiny_llm, tiny_phi3,  # noqa: F401
                             tiny_qwen2)
from judge_engine import ScoreError
from judge_engine.engine.sampler import SamplingParams

CHOICES = [" yes", " no"]
NUM_LAYERS = 2                      # the tiny models' decoder layers
EVERY_LAYER = list(range(NUM_LAYERS + 1))
HIDDEN = 64


def hf_hidden_states(folder, token_ids: list[int]) -> torch.Tensor:
    """transformers' hidden states [num_layers + 1, len, H] of one sequence (float32)."""
    with torch.no_grad():
        out = hf_model(str(folder))(torch.tensor([token_ids]), output_hidden_states=True)
    return torch.stack([h[0].float() for h in out.hidden_states])


def run_engine(llm, prompts, params, **hidden):
    """The step API: one request per prompt asking for the same hidden states; outputs in prompt order."""
    engine = llm.engine
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, params, stream=False, **hidden)
    finished = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            finished[out.request_id] = out
    return [finished[f"r{i}"] for i in range(len(prompts))]


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_qwen2", "tiny_gemma2", "tiny_phi3"])
def test_every_layer_matches_transformers_output_hidden_states(family, request):
    folder = request.getfixturevalue(family)
    llm = tiny_llm(folder)
    prompt = random_prompt(7, 150)   # past a 128-key attention segment and Gemma 2's 16-key window
    positions = [-1, 40, 0, -20]
    [scored] = llm.score_with_usage([prompt], [[17], [42]], hidden_layers=EVERY_LAYER, hidden_positions=positions)
    reference = hf_hidden_states(folder, prompt)
    expected = reference[:, [p % len(prompt) for p in positions]].transpose(0, 1)   # [positions, layers, H]
    got = scored.hidden_states
    assert got.shape == (len(positions), NUM_LAYERS + 1, HIDDEN)
    assert got.dtype == torch.float32 and got.device.type == "cpu"
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    # the last layer is the final norm's output: the row the scores come from
    logprobs = torch.log_softmax(llm.engine.model.compute_logits(got[0, -1:]), dim=-1)[0]
    assert logprobs[[17, 42]].tolist() == scored.logprobs
    # negative layers count from the end; a layer asked twice comes twice, in the order asked
    [again] = llm.score_with_usage([prompt], CHOICES, hidden_layers=[-1, 0, -3, 2], hidden_positions=[-1])
    assert torch.equal(again.hidden_states[0], got[0, [2, 0, 0, 2]])


def batch_invariance(make_llm) -> None:
    """A target's hidden states (and scores) alone equal those it gets among prompts of other lengths, sharing a
    prefix that an earlier call cached, bit for bit."""
    shared = random_prompt(50, 37)
    target = shared + random_prompt(51, 23)
    others = [random_prompt(60 + i, 10 + (i * 11) % 70) for i in range(12)]
    others += [shared + random_prompt(80 + i, 3 + i) for i in range(6)]
    asked = dict(hidden_layers=EVERY_LAYER, hidden_positions=[-1, -2, -9])
    choices = [[17], [42]]   # one token each: a prompt's usage is its own sequence's

    [alone] = make_llm(enable_prefix_caching=False).score_with_usage([target], choices, **asked)

    llm = make_llm()
    llm.score_with_usage([shared + [9, 9, 9]], choices)
    batch = others[:9] + [target] + others[9:]
    results = llm.score_with_usage(batch, choices, **asked)
    in_batch = results[9]
    assert in_batch.usage.cached_tokens == 36   # the shared prefix's 9 full blocks came from the earlier call
    assert torch.equal(in_batch.hidden_states, alone.hidden_states)
    assert in_batch.logprobs == alone.logprobs
    # and every other prompt's rows are its own: each equals that prompt scored alone
    for index in (0, 4, 15):
        [own] = make_llm(enable_prefix_caching=False).score_with_usage([batch[index]], choices, **asked)
        assert torch.equal(results[index].hidden_states, own.hidden_states)
        assert results[index].logprobs == own.logprobs


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gemma2"])
def test_hidden_states_alone_equal_those_in_a_batch_with_a_prefix_hit(family, request):
    folder = request.getfixturevalue(family)
    batch_invariance(lambda **kw: tiny_llm(folder, **kw))


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_qwen2"])
def test_int8_hidden_states_alone_equal_those_in_a_batch_with_a_prefix_hit(family, request, tmp_path):
    folder = request.getfixturevalue(family)
    batch_invariance(lambda **kw: tiny_llm(folder, quantization="int8", cache_dir=tmp_path, **kw))


def test_a_second_call_on_a_cached_prompt_computes_the_asked_positions_again(tiny_llama):
    llm = tiny_llm(tiny_llama)   # block_size 4
    prompt = random_prompt(3, 50)
    asked = dict(hidden_layers=EVERY_LAYER, hidden_positions=[-1, 9, 30])
    single_tokens = [[17], [42]]   # no prompt+choice sequences: the usage is the prompt's alone
    [first] = llm.score_with_usage([prompt], single_tokens, **asked)
    [second] = llm.score_with_usage([prompt], single_tokens, **asked)
    assert first.usage.cached_tokens == 0
    assert second.usage.cached_tokens == 8     # reuse capped before position 9: its block and later recomputed
    assert torch.equal(first.hidden_states, second.hidden_states)
    assert first.logprobs == second.logprobs
    [plain] = llm.score_with_usage([prompt], single_tokens)     # without hidden states, only the last token is computed
    assert plain.usage.cached_tokens == 48 and plain.logprobs == first.logprobs and plain.hidden_states is None


@pytest.mark.parametrize("family, quantization", [("tiny_llama", None), ("tiny_gemma2", None), ("tiny_qwen2", "int8")])
def test_chunked_prefill_gives_the_same_bits_as_one_chunk(family, quantization, request, tmp_path):
    folder = request.getfixturevalue(family)
    options = {} if quantization is None else dict(quantization=quantization, cache_dir=tmp_path)
    prompts = [random_prompt(20, 61), random_prompt(21, 13), random_prompt(22, 140)]
    asked = dict(hidden_layers=EVERY_LAYER, hidden_positions=[0, 6, 7, 12, -1])
    whole = tiny_llm(folder, **options).score_with_usage(prompts, CHOICES, **asked)
    # positions 0..6 and 7.. land in different chunks; the logits bits do not depend on chunking either
    chunked_llm = tiny_llm(folder, max_num_batched_tokens=7, **options)
    chunked = chunked_llm.score_with_usage(prompts, CHOICES, **asked)
    assert chunked_llm.stats()["steps"] >= sum(len(p) for p in prompts) // 7
    for a, b in zip(whole, chunked):
        assert torch.equal(a.hidden_states, b.hidden_states)
        assert a.logprobs == b.logprobs


def test_preempted_and_recomputed_requests_keep_each_row_once(tiny_llama):
    prompts = [random_prompt(30 + i, 9 + i) for i in range(6)]
    params = SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True)
    asked = dict(hidden_layers=[0, -1, 1], hidden_positions=[-1, 2, 5])
    roomy = run_engine(tiny_llm(tiny_llama), prompts, params, **asked)
    small_llm = tiny_llm(tiny_llama, blocks=12, max_num_seqs=6)
    small = run_engine(small_llm, prompts, params, **asked)
    assert small_llm.stats()["preemptions"] > 0
    assert any(out.metrics.num_preemptions for out in small)
    for a, b in zip(roomy, small):
        assert b.hidden_states.shape == (3, 3, HIDDEN)
        assert torch.equal(a.hidden_states, b.hidden_states)
        assert a.token_ids == b.token_ids


def test_capturing_changes_no_score(tiny_llama):
    llm = tiny_llm(tiny_llama)
    prompts = [random_prompt(40 + i, 6 + 9 * i) for i in range(8)]
    choices = [[" yes", " no", " maybe not"], [[7, 8, 9]], *[CHOICES] * 6]   # a statement: no prompt-alone sequence
    plain = tiny_llm(tiny_llama).score_with_usage(prompts, choices)
    # the last two positions are one query run with the logits row in the last layer
    captured = llm.score_with_usage(prompts, choices, hidden_layers=EVERY_LAYER, hidden_positions=[-2, -1, 1])
    assert [r.logprobs for r in captured] == [r.logprobs for r in plain]
    assert all(r.hidden_states is None for r in plain)
    assert all(r.hidden_states.shape == (3, NUM_LAYERS + 1, HIDDEN) for r in captured)
    # the statement's hidden states come from its prompt+choice sequence: the same rows as the prompt's alone
    [alone] = tiny_llm(tiny_llama).score_with_usage([prompts[1]], CHOICES, hidden_layers=EVERY_LAYER,
                                                    hidden_positions=[-2, -1, 1])
    assert torch.equal(captured[1].hidden_states, alone.hidden_states)
    assert llm.score(prompts, choices) == [r.logprobs for r in plain]


def test_only_the_asked_rows_are_kept(tiny_llama):
    llm = tiny_llm(tiny_llama)
    [scored] = llm.score_with_usage([random_prompt(5, 500)], CHOICES, hidden_layers=[-1], hidden_positions=[-1])
    assert scored.hidden_states.shape == (1, 1, HIDDEN)
    assert scored.hidden_states.untyped_storage().nbytes() == HIDDEN * 4


def test_step_api_requests_return_hidden_states(tiny_llama):
    llm = tiny_llm(tiny_llama)
    prompt = random_prompt(6, 33)
    [out] = run_engine(llm, [prompt], SamplingParams(temperature=0.0, max_tokens=3),
                       hidden_layers=[-1], hidden_positions=[-1, 0])
    [scored] = llm.score_with_usage([prompt], CHOICES, hidden_layers=[-1], hidden_positions=[-1, 0])
    assert len(out.token_ids) == 3 and torch.equal(out.hidden_states, scored.hidden_states)
    [plain] = run_engine(llm, [prompt], SamplingParams(temperature=0.0, max_tokens=1))
    assert plain.hidden_states is None


def test_requests_asking_other_layers_in_one_step_each_get_their_own(tiny_llama):
    """Two callers' requests in one batch: the step captures the union of their layers, each gets its own."""
    llm = tiny_llm(tiny_llama)
    prompts = [random_prompt(70, 21), random_prompt(71, 34)]
    asks = [dict(hidden_layers=[2, 0], hidden_positions=[-1]), dict(hidden_layers=[1], hidden_positions=[3, -1])]
    engine = llm.engine
    for i, (prompt, asked) in enumerate(zip(prompts, asks)):
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=0), stream=False, **asked)
    outs = {out.request_id: out for out in engine.step()}
    assert set(outs) == {"r0", "r1"}   # one step ran both
    for i, (prompt, asked) in enumerate(zip(prompts, asks)):
        [alone] = llm.score_with_usage([prompt], CHOICES, **asked)
        assert torch.equal(outs[f"r{i}"].hidden_states, alone.hidden_states)
    assert outs["r0"].hidden_states.shape == (1, 2, HIDDEN) and outs["r1"].hidden_states.shape == (2, 1, HIDDEN)


def test_out_of_range_layers_and_positions_are_named(tiny_llama):
    llm = tiny_llm(tiny_llama)
    short, long = random_prompt(8, 5), random_prompt(9, 30)
    for layer in (3, -4):
        with pytest.raises(ValueError, match=rf"layer {layer} is out of range .*-3\.\.2"):
            llm.score_with_usage([long], CHOICES, hidden_layers=[0, layer])
    with pytest.raises(ValueError, match="hidden_positions"):
        llm.score_with_usage([long], CHOICES, hidden_layers=[0], hidden_positions=[])
    with pytest.raises(TypeError, match="hidden_layers"):
        llm.score_with_usage([long], CHOICES, hidden_layers=[1.0])
    with pytest.raises(TypeError, match="hidden_layers: expected a sequence of integers"):
        llm.score_with_usage([long], CHOICES, hidden_layers=2)

    results = llm.score_with_usage([short, long], CHOICES, hidden_layers=[0], hidden_positions=[-1, 10])
    assert isinstance(results[0], ScoreError) and results[0].prompt_index == 0
    assert "hidden position 10 is out of range for a 5-token prompt (valid: -5..4)" in str(results[0])
    assert results[1].hidden_states.shape == (2, 1, HIDDEN)
    with pytest.raises(ScoreError, match=r"hidden position -6 is out of range for a 5-token prompt"):
        llm.score_with_usage([short], CHOICES, hidden_layers=[0], hidden_positions=[-6])
    # the step API refuses the request like a prompt that cannot run
    [out] = run_engine(llm, [short], SamplingParams(max_tokens=1), hidden_layers=[0], hidden_positions=[5])
    assert out.finish_reason == "error" and out.rejected and "hidden position 5" in out.error
