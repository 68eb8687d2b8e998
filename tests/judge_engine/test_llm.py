"""LLM and LLMEngine behaviour on a tiny checkpoint: generation controls, score, errors, the step API, stats."""

from __future__ import annotations

import math

import pytest
import torch

from engine_fixtures import hf_logits, hf_model, random_prompt, tiny_llama, tiny_llm  # noqa: F401
from judge_engine import EngineConfig, SamplingParams, ScoreError
from judge_engine.config import EngineConfigError


def manual_greedy(folder, prompt: list[int], n: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(n):
        tokens.append(int(hf_logits(folder, tokens)[-1].argmax()))
    return tokens[len(prompt):]


@pytest.fixture(scope="module")
def llm(tiny_llama):
    return tiny_llm(tiny_llama)


def greedy(max_tokens: int, **kwargs) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, **kwargs)


def test_greedy_generation_equals_transformers(llm, tiny_llama):
    prompts = [random_prompt(20 + i, 6 + 5 * i) for i in range(3)]
    outs = llm.generate(prompts, greedy(10))
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == manual_greedy(tiny_llama, prompt, 10)
        assert out.finish_reason == "length" and out.finished


def test_outputs_come_back_in_prompt_order_with_per_prompt_params(llm):
    prompts = [random_prompt(30 + i, 4 + i) for i in range(4)]
    outs = llm.generate(prompts, [greedy(n) for n in (5, 1, 3, 2)])
    assert [len(o.token_ids) for o in outs] == [5, 1, 3, 2]
    assert [o.prompt_token_ids for o in outs] == prompts
    single = llm.generate(prompts[0], greedy(5))
    assert single[0].token_ids == outs[0].token_ids


def test_stop_token_ends_generation_and_is_kept(llm):
    prompt = random_prompt(40, 8)
    free = llm.generate([prompt], greedy(10))[0].token_ids
    stop_at = free[4]
    first = free.index(stop_at)
    [out] = llm.generate([prompt], greedy(10, stop_token_ids=[stop_at]))
    assert out.token_ids == free[:first + 1] and out.finish_reason == "stop"


def test_eos_stops_unless_ignored(llm, tiny_llama):
    prompt = random_prompt(41, 8)
    free = llm.generate([prompt], greedy(6)).pop().token_ids
    # make the model's third greedy token an end-of-sequence token for this engine
    llm.engine.eos_token_ids = frozenset({free[2]})
    try:
        stopped = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=6)).pop()
        ignored = llm.generate([prompt], greedy(6)).pop()
    finally:
        llm.engine.eos_token_ids = frozenset({2})
    assert stopped.token_ids == free[:free.index(free[2]) + 1] and stopped.finish_reason == "stop"
    assert ignored.token_ids == free


def test_stop_string_cuts_the_text(llm):
    prompt = "The quick brown fox"
    free = llm.generate([prompt], greedy(16))[0]
    text = free.text
    assert len(text) > 6
    stop = text[3:5]
    [out] = llm.generate([prompt], greedy(16, stop=[stop, "never-there"]))
    assert out.finish_reason == "stop"
    assert out.text == text[:text.index(stop)]
    [kept] = llm.generate([prompt], greedy(16, stop=stop, include_stop_str_in_output=True))
    assert kept.text == text[:text.index(stop) + len(stop)]


def test_text_is_the_decoded_output(llm):
    [out] = llm.generate(["Judges grade"], greedy(12))
    assert out.text == llm.tokenizer.decode(out.token_ids, skip_special_tokens=True)


def test_logprobs_of_generated_tokens(llm, tiny_llama):
    prompt = random_prompt(42, 10)
    [out] = llm.generate([prompt], greedy(4, logprobs=3))
    reference = torch.log_softmax(hf_logits(tiny_llama, prompt + out.token_ids), dim=-1)
    assert len(out.logprobs) == 4
    for i, (token, entry) in enumerate(zip(out.token_ids, out.logprobs)):
        assert token in entry and len(entry) <= 4
        row = reference[len(prompt) - 1 + i]
        assert entry[token] == pytest.approx(float(row[token]), abs=1e-4)
        assert set(entry) >= set(torch.topk(row, 3).indices.tolist()) - {token} or len(entry) == 4


def test_prompt_logprobs(llm, tiny_llama):
    prompt = random_prompt(43, 12)
    [out] = llm.generate([prompt], SamplingParams(max_tokens=0, prompt_logprobs=2))
    reference = torch.log_softmax(hf_logits(tiny_llama, prompt), dim=-1)
    assert out.prompt_logprobs[0] is None and out.token_ids == []
    for position in range(1, 12):
        entry = out.prompt_logprobs[position]
        assert entry[prompt[position]] == pytest.approx(float(reference[position - 1, prompt[position]]), abs=1e-4)


def test_seeded_sampling_is_reproducible_in_any_batch(llm):
    prompt = random_prompt(44, 7)
    params = SamplingParams(temperature=1.0, seed=123, max_tokens=8, ignore_eos=True)
    alone = llm.generate([prompt], params)[0].token_ids
    others = [random_prompt(50 + i, 5 + i) for i in range(3)]
    batch = llm.generate(others + [prompt], [SamplingParams(temperature=1.0, max_tokens=8)] * 3 + [params])
    assert batch[-1].token_ids == alone


def test_score_equals_transformers_log_probabilities(llm, tiny_llama):
    prompts = ["Did the agent email the CFO? Answer:", "The total travel spend is"]
    choices = [" yes", " no", " 48.2L"]
    scores = llm.score(prompts, choices)
    for prompt, row in zip(prompts, scores):
        prompt_ids = llm.tokenizer(prompt)["input_ids"]
        for choice, value in zip(choices, row):
            choice_ids = llm.tokenizer.encode(choice, add_special_tokens=False)
            full = prompt_ids + choice_ids
            logprobs = torch.log_softmax(hf_logits(tiny_llama, full), dim=-1)
            expected = sum(float(logprobs[len(prompt_ids) - 1 + i, t]) for i, t in enumerate(choice_ids))
            assert value == pytest.approx(expected, abs=1e-4)


def test_score_accepts_per_prompt_choices_and_token_ids(llm):
    prompts = [random_prompt(60, 9), random_prompt(61, 14)]
    yes = llm.tokenizer.encode(" yes", add_special_tokens=False)
    shared = llm.score(prompts, [" yes", " no"])
    by_ids = llm.score(prompts, [yes, " no"])
    per_prompt = llm.score(prompts, [[" no", yes], [" maybe", " yes", [7, 8, 9]]])
    close = dict(abs=1e-5)  # later calls hit the prefix cache: same values up to float rounding
    assert by_ids[0] == pytest.approx(shared[0], **close) and by_ids[1] == pytest.approx(shared[1], **close)
    assert per_prompt[0] == pytest.approx([shared[0][1], shared[0][0]], **close)
    assert per_prompt[1][1] == pytest.approx(shared[1][0], **close) and len(per_prompt[1]) == 3
    reference = torch.log_softmax(hf_logits(llm.model_path, prompts[1] + [7, 8, 9]), -1)
    assert per_prompt[1][2] == pytest.approx(sum(float(reference[13 + i, t]) for i, t in enumerate([7, 8, 9])),
                                             abs=1e-4)
    scored: list[int] = []
    llm.score(prompts, [" yes", " no"], on_scored=scored.append)
    assert sorted(scored) == [0, 1]
    bad = llm.score(prompts, [[" yes"], [[]]])
    assert isinstance(bad[0], list) and isinstance(bad[1], ScoreError) and "no tokens" in bad[1].message
    with pytest.raises(ValueError, match="choices"):
        llm.score(prompts, [[" yes"]])  # neither shared choices nor one list per prompt
    with pytest.raises(ValueError, match="no tokens"):
        llm.score(prompts, [" yes", ""])
    assert llm.max_model_len == 512


def test_score_reuses_the_prompt_blocks_across_choices(llm):
    before = llm.stats()
    prompt = random_prompt(45, 64)  # 16 full blocks of 4
    choices = [" yes", " no", " maybe"]
    llm.score([prompt], choices)
    after = llm.stats()
    computed = after["computed_prompt_tokens"] - before["computed_prompt_tokens"]
    lengths = [len(llm.tokenizer.encode(c, add_special_tokens=False)) for c in choices]
    assert max(lengths) > 1  # the test needs a multi-token choice
    # the prompt once (its last row gives every first choice token); a longer choice adds only its own tokens
    assert computed == 64 + sum(n for n in lengths if n > 1)


def test_score_with_usage_attributes_the_batch_tokens_to_each_prompt(llm):
    shared = random_prompt(48, 40)
    prompts = [shared + [7, 8], shared + [9], random_prompt(49, 12)]
    before = llm.stats()
    results = llm.score_with_usage(prompts, [" yes", " no", " maybe"])
    after = llm.stats()
    assert [r.logprobs for r in results] == llm.score(prompts, [" yes", " no", " maybe"])
    usage = [r.usage for r in results]
    for key, field in (("prompt_tokens", "prompt_tokens"), ("cached_prompt_tokens", "cached_tokens"),
                       ("computed_prompt_tokens", "computed_tokens")):
        assert sum(getattr(u, field) for u in usage) == after[key] - before[key], key
    assert usage[1].cached_tokens >= 40 - 4     # the shared prefix's full blocks, computed by the first prompt
    assert all(u.output_tokens == 0 for u in usage)
    again = llm.score_with_usage(prompts, [" yes", " no", " maybe"])
    assert [r.logprobs for r in again] == [r.logprobs for r in results]
    assert all(r.usage.computed_tokens < u.prompt_tokens for r, u in zip(again, usage))   # prefix hits now


def test_a_single_multi_token_choice_is_scored_by_its_own_sequence_alone(llm):
    prompt = random_prompt(46, 64)
    statement = " maybe maybe"
    assert len(llm.tokenizer.encode(statement, add_special_tokens=False)) > 1
    with_others = llm.score([prompt], [statement, " yes"])[0][0]
    alone = llm.score([prompt], [[statement]])[0][0]  # no prompt-alone sequence: the first token from its own
    assert alone == pytest.approx(with_others, abs=1e-5)


def test_score_error_for_one_prompt_keeps_the_others(llm):
    too_long = random_prompt(46, 600)  # the tiny model's context is 512
    result = llm.score([random_prompt(47, 5), too_long, []], [" yes", " no"])
    assert isinstance(result[0], list) and len(result[0]) == 2
    assert isinstance(result[1], ScoreError) and "context" in str(result[1])
    assert isinstance(result[2], ScoreError) and result[2].prompt_index == 2
    with pytest.raises(ScoreError):
        llm.score([too_long], [" yes"])


def test_too_long_prompts_get_an_error_and_the_others_finish(tiny_llama):
    llm = tiny_llm(tiny_llama, blocks=20)  # 80 slots
    outs = llm.generate([random_prompt(48, 600), random_prompt(49, 100), random_prompt(50, 6)], greedy(3))
    assert outs[0].finish_reason == "error" and "context" in outs[0].error
    assert outs[1].finish_reason == "error" and "KV cache" in outs[1].error
    assert outs[2].finish_reason == "length" and len(outs[2].token_ids) == 3
    assert llm.stats()["failed_requests"] == 2


def test_generation_stops_at_the_cache_capacity(tiny_llama):
    llm = tiny_llm(tiny_llama, blocks=4)  # 16 slots in all
    [out] = llm.generate([random_prompt(51, 10)], greedy(50))
    assert out.finish_reason == "length" and len(out.token_ids) == 6


def test_out_of_vocabulary_ids_are_a_request_error(llm):
    [out] = llm.generate([[5, 6, 100000]], greedy(2))
    assert out.finish_reason == "error" and "vocabulary" in out.error


def test_step_api_streams_and_aborts(llm):
    engine = llm.engine
    engine.add_request("a", random_prompt(52, 6), greedy(5))
    engine.add_request("b", random_prompt(53, 6), greedy(50))
    engine.add_request("c", random_prompt(54, 6), greedy(3), stream=False)
    with pytest.raises(ValueError, match="already"):
        engine.add_request("a", [1, 2], greedy(1))
    seen: dict[str, list] = {"a": [], "b": [], "c": []}
    finished = {}
    steps = 0
    while "a" not in finished:
        for out in engine.step():
            seen[out.request_id].append(out)
            if out.finished:
                finished[out.request_id] = out
        steps += 1
    engine.abort_request("b")
    engine.abort_request("unknown")  # ignored
    assert not engine.has_unfinished_requests() and not engine.has_unfinished()
    assert engine.block_manager.num_used == 0
    streamed = [t for out in seen["a"] for t in out.new_token_ids]
    assert streamed == finished["a"].token_ids and len(seen["a"]) == 5
    assert "".join(out.new_text for out in seen["a"]) == finished["a"].text
    assert [o.finished for o in seen["c"]] == [True]  # stream=False: only the final output
    assert all(not o.finished for o in seen["b"])


def test_streamed_text_never_shows_a_stop_string(llm):
    prompt = "The quick brown fox"
    text = llm.generate([prompt], greedy(16))[0].text
    stop = text[4:7]
    engine = llm.engine
    engine.add_request("s", prompt, greedy(16, stop=stop))
    pieces, final = [], None
    while engine.has_unfinished_requests():
        for out in engine.step():
            pieces.append(out.new_text)
            final = out if out.finished else final
            assert stop not in out.text
    assert final.text == text[:text.index(stop)] and "".join(pieces) == final.text


def test_a_failing_model_step_fails_its_requests_not_the_engine(tiny_llama, monkeypatch):
    # a budget that fits the two prompts sharing a prefix (the second one shares the first one's blocks in
    # the same step) but not the third, which runs in the next step
    llm = tiny_llm(tiny_llama, max_num_batched_tokens=62)
    shared = random_prompt(62, 60)
    other = random_prompt(63, 30)
    expected = tiny_llm(tiny_llama).generate([shared + [5], other], greedy(2))
    original = llm.engine.runner.execute
    calls = []

    def fail_once(scheduled):
        calls.append(sorted(item.seq.request_id for item in scheduled))
        if len(calls) == 1:
            raise RuntimeError("simulated out of memory")
        return original(scheduled)

    monkeypatch.setattr(llm.engine.runner, "execute", fail_once)
    outs = llm.generate([shared + [5], shared + [6], other], greedy(2))
    assert len(calls[0]) == 2, "both prompts of the shared prefix ran in the failing step"
    assert [o.finish_reason for o in outs] == ["error", "error", "length"]
    assert all("simulated out of memory" in o.error for o in outs[:2])
    assert outs[2].token_ids == expected[1].token_ids
    assert llm.engine.block_manager.num_used == 0
    # the shared blocks of the failed step were never computed: they must not be served from the cache
    cached_before = llm.engine.stats()["cached_prompt_tokens"]
    again = llm.generate([shared + [5]], greedy(2))[0]
    assert again.token_ids == expected[0].token_ids
    assert llm.engine.stats()["cached_prompt_tokens"] == cached_before


def test_request_metrics(llm):
    [out] = llm.generate([random_prompt(55, 6)], greedy(5))
    m = out.metrics
    assert m.time_to_first_token > 0 and m.time_per_output_token > 0 and m.num_output_tokens == 5
    assert (out.usage.prompt_tokens, out.usage.output_tokens) == (6, 5)
    assert out.usage.computed_tokens == 6 - m.num_cached_tokens


def test_stats_have_the_spec_keys_and_add_up(tiny_llama):
    llm = tiny_llm(tiny_llama)
    shared = random_prompt(56, 40)
    llm.generate([shared + [5], shared + [6]], greedy(2))
    stats = llm.stats()
    for key in ("prompt_tokens", "computed_prompt_tokens", "cached_prompt_tokens", "prefix_cache_hit_rate",
                "preemptions", "kv_blocks_total", "kv_blocks_peak", "generated_tokens", "steps"):
        assert key in stats
    assert stats["prompt_tokens"] == 82
    assert stats["cached_prompt_tokens"] == 40 and stats["computed_prompt_tokens"] == 42
    assert stats["prefix_cache_hit_rate"] == pytest.approx(40 / 82)
    assert stats["generated_tokens"] == 4 and stats["kv_blocks_total"] == 256


def test_prefix_caching_can_be_turned_off(tiny_llama):
    llm = tiny_llm(tiny_llama, enable_prefix_caching=False)
    shared = random_prompt(57, 40)
    llm.generate([shared + [5], shared + [6]], greedy(1))
    assert llm.stats()["cached_prompt_tokens"] == 0


def test_bfloat16_runs_close_to_float32(tiny_llama):
    llm16 = tiny_llm(tiny_llama, dtype="bfloat16")
    prompt = random_prompt(58, 20)
    [out] = llm16.generate([prompt], SamplingParams(max_tokens=0, prompt_logprobs=0, return_logits=True))
    reference = hf_logits(tiny_llama, prompt)
    assert out.logits.dtype == torch.float32
    assert (out.logits - reference[:19]).abs().max() < 0.25  # bf16 rounding, not a layout error


@pytest.mark.parametrize("kwargs, field", [
    ({"dtype": "float16"}, "dtype"),
    ({"device": "tpu"}, "device"),
    ({"block_size": 0}, "block_size"),
    ({"max_num_seqs": -1}, "max_num_seqs"),
    ({"max_num_batched_tokens": 1.5}, "max_num_batched_tokens"),
    ({"kv_cache_bytes": 0}, "kv_cache_bytes"),
    ({"enable_prefix_caching": "yes"}, "enable_prefix_caching"),
    ({"attention_backend": "cuda"}, "attention_backend"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
])
def test_engine_config_names_the_bad_field(kwargs, field):
    with pytest.raises(EngineConfigError, match=field):
        EngineConfig(**kwargs)


def test_kv_cache_too_small_for_one_block(tiny_llama):
    from judge_engine import LLM
    from judge_engine.engine.kv_cache import KVCacheTooSmall

    with pytest.raises(KVCacheTooSmall, match="kv_cache_bytes"):
        LLM(str(tiny_llama), kv_cache_bytes=10)


@pytest.mark.slow
def test_embedded_greedy_equals_transformers_generate():
    from judge_engine import LLM
    from judge_engine.loading.loader import model_folder

    llm = LLM(dtype="float32")   # transformers' reference computes in float32
    messages = [{"role": "user", "content": "Name three colours of the rainbow."}]
    prompt = llm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    [out] = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=24))
    reference_model = hf_model(str(model_folder(llm.model_path)))
    ids = torch.tensor([out.prompt_token_ids])
    with torch.no_grad():
        expected = reference_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24,
                                            do_sample=False)[0, ids.shape[1]:].tolist()
    assert out.token_ids == expected
    assert not math.isnan(llm.score([prompt], [" Red"])[0][0])


def test_cuda_cache_sizing_uses_free_memory_after_warm_up(monkeypatch):
    from types import SimpleNamespace

    from judge_engine.engine import kv_cache

    spec = SimpleNamespace(num_layers=30, num_kv_heads=3, head_dim=64)
    gib = 1 << 30
    calls = []
    fake = SimpleNamespace(
        synchronize=lambda device=None: None, empty_cache=lambda: None,
        reset_peak_memory_stats=lambda device=None: None,
        memory_allocated=lambda device=None: 2 * gib,            # weights
        max_memory_allocated=lambda device=None: 3 * gib,        # weights + 1 GiB of warm-up activations
        mem_get_info=lambda device=None: (100 * gib, 140 * gib),  # 40 GiB used by weights, context, others
    )
    monkeypatch.setattr(kv_cache.torch, "cuda", fake)
    config = EngineConfig(device="cuda", gpu_memory_utilization=0.5)
    blocks = kv_cache.cuda_num_blocks(config, spec, lambda: calls.append("warm-up"))
    per_block = kv_cache.bytes_per_block(spec, 16, torch.float32)
    assert calls == ["warm-up"]
    assert blocks == (70 * gib - 40 * gib - 1 * gib) // per_block
    fixed = EngineConfig(device="cuda", kv_cache_bytes=100 * per_block)
    assert kv_cache.cuda_num_blocks(fixed, spec, lambda: calls.append("again")) == 100 and calls == ["warm-up"]


def test_a_cpu_kv_cache_is_zeroed_and_costs_memory_only_where_written():
    """In a fresh interpreter, so that nothing else moves the peak: 256 MiB of KV cache, all zeros, costs a few MiB
    until written; writing a quarter of it costs about a quarter."""
    import subprocess
    import sys

    code = """
import resource, torch
from judge_engine.engine.kv_cache import zeroed_on_demand
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
before = rss()
cache = zeroed_on_demand((2, 4, 256, 16, 16, 128), torch.float32)   # 256 MiB
assert cache.shape == (2, 4, 256, 16, 16, 128) and cache.dtype == torch.float32
assert not bool(cache[1, 3, 200:].any())
allocated = rss() - before
cache[0, :2].fill_(1.0)   # a quarter
written = rss() - before
print(f'{allocated:.0f} {written:.0f}')
"""
    allocated, written = map(float, subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                                   text=True).stdout.split())
    assert allocated < 32, f"{allocated} MiB resident before any write"
    assert 48 < written < 128, f"{written} MiB resident after writing 64 MiB"
