"""Gemma 2 against transformers on a tiny random checkpoint (float32, within 1e-3) through the engine: single
prompts, prefix-cache hits, chunked prefill, decode and preemption, with prompts longer than the sliding window
and longer than one 128-key attention segment. test_models.py runs the model-level family tests on it too."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from engine_fixtures import max_logit_error, random_prompt, tiny_gemma2, tiny_llm  # noqa: F401
from tiny_models import reference_logits, run_chunks, save_tiny_checkpoint

from judge_engine import SamplingParams
from judge_engine.models import ModelConfigError, load_model
from judge_engine.models.gemma2 import Gemma2Config

ATOL = 1e-3


def all_positions(max_tokens: int = 1) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, prompt_logprobs=0, return_logits=True,
                          ignore_eos=True)


def test_config_alternates_sliding_and_full_layers(tiny_gemma2):
    config = Gemma2Config.from_folder(tiny_gemma2)
    assert config.layer_windows == (16, None)
    assert (config.attn_logit_softcapping, config.final_logit_softcapping) == (2.0, 5.0)
    assert config.query_pre_attn_scalar == 24.0 and config.tie_word_embeddings
    raw = json.loads((tiny_gemma2 / "config.json").read_text())
    del raw["layer_types"]  # written before transformers recorded it: the same alternation, sliding first
    raw["num_hidden_layers"] = 3
    assert Gemma2Config.from_dict(raw).layer_windows == (16, None, 16)
    with pytest.raises(ModelConfigError, match="hidden_activation"):
        Gemma2Config.from_dict(dict(raw, hidden_activation="relu"))


def test_long_prompt_matches_transformers_and_the_window_and_caps_matter(tiny_gemma2):
    """150 positions: past the window of 16 and past the first 128-key segment of the CPU attention."""
    model, spec = load_model(tiny_gemma2, torch.float32, "cpu")
    prompt = random_prompt(11, 150)
    (reference,) = reference_logits(tiny_gemma2, [prompt])
    (whole,) = run_chunks(model, spec, [prompt], [[150]])
    (chunked,) = run_chunks(model, spec, [prompt], [[100, 37, 13]])
    assert (whole - reference).abs().max() < ATOL
    assert torch.equal(whole, chunked)  # batch invariance holds for windowed and soft-capped attention too
    # the same model without each feature is far off: the test sees every one of them
    for layer in model.layers:
        layer.self_attn.window = None
    (no_window,) = run_chunks(model, spec, [prompt], [[150]])
    assert (no_window - reference).abs().max() > 0.05
    for layer in model.layers:
        layer.self_attn.window, layer.self_attn.softcap = 16 if layer is model.layers[0] else None, None
    (no_attention_cap,) = run_chunks(model, spec, [prompt], [[150]])
    assert (no_attention_cap - reference).abs().max() > 0.05
    hidden = 10 * torch.randn(4, spec.hidden_size, generator=torch.Generator().manual_seed(0))
    capped = model.compute_logits(hidden)
    model.config = replace(model.config, final_logit_softcapping=None)
    raw = model.compute_logits(hidden)
    assert raw.abs().max() > 6.0 and capped.abs().max() < 5.0
    torch.testing.assert_close(capped, 5.0 * torch.tanh(raw / 5.0))


def test_single_prompt_every_position(tiny_gemma2):
    llm = tiny_llm(tiny_gemma2)
    [out] = llm.generate([random_prompt(1, 37)], all_positions(max_tokens=3))
    assert out.logits_positions == list(range(39))
    assert max_logit_error(tiny_gemma2, out) < ATOL


def test_prefix_cache_hits(tiny_gemma2):
    llm = tiny_llm(tiny_gemma2)
    shared = random_prompt(2, 30)
    llm.generate([shared + [7, 8]], SamplingParams(temperature=0.0, max_tokens=1))
    params = SamplingParams(temperature=0.0, max_tokens=4, return_logits=True, ignore_eos=True)
    outs = llm.generate([shared + random_prompt(3, 5), shared + [9]], params)
    for out in outs:
        assert out.metrics.num_cached_tokens == 28
        assert max_logit_error(tiny_gemma2, out) < ATOL


def test_chunked_prefill_across_segments(tiny_gemma2):
    llm = tiny_llm(tiny_gemma2, max_num_batched_tokens=23)  # chunks end inside blocks, windows and segments
    outs = llm.generate([random_prompt(4, 140), random_prompt(5, 11)], all_positions(max_tokens=2))
    assert llm.stats()["steps"] >= 7
    for out in outs:
        assert max_logit_error(tiny_gemma2, out) < ATOL


def test_preempted_and_recomputed_sequences(tiny_gemma2):
    llm = tiny_llm(tiny_gemma2, blocks=12, max_num_seqs=6)
    params = SamplingParams(temperature=0.0, max_tokens=10, return_logits=True, ignore_eos=True)
    outs = llm.generate([random_prompt(10 + i, 9 + i) for i in range(6)], params)
    assert llm.stats()["preemptions"] > 0
    for out in outs:
        assert len(out.token_ids) == 10
        assert max_logit_error(tiny_gemma2, out) < ATOL


def test_untied_checkpoint_with_exact_gelu(tmp_path):
    folder = save_tiny_checkpoint("gemma2", tmp_path, seed=5, tie_word_embeddings=False, hidden_activation="gelu",
                                  num_hidden_layers=3)
    model, spec = load_model(folder, torch.float32, "cpu")
    assert model.lm_head is not None and model.config.gelu_approximate == "none"
    prompt = random_prompt(6, 40)
    (ours,) = run_chunks(model, spec, [prompt], [[25, 15]])
    (reference,) = reference_logits(folder, [prompt])
    assert (ours - reference).abs().max() < ATOL
