"""Phi-3 against transformers on tiny random checkpoints (float32, within 1e-3): fused Q/K/V and gate/up tensors,
long-rope with the short and the long factors, a sliding window on every layer, and through the engine: prefix
hits, chunked prefill, decode and preemption. test_models.py runs the model-level family tests on it too."""

from __future__ import annotations

import json

import pytest
import torch
from engine_fixtures import max_logit_error, random_prompt, tiny_llm, tiny_phi3  # noqa: F401
from tiny_models import TINY_FAMILIES, reference_logits, run_chunks, save_tiny_checkpoint

from judge_engine import SamplingParams
from judge_engine.models import ModelConfigError, load_model
from judge_engine.models.phi3 import Phi3Config

ATOL = 1e-3
SHORT_CONTEXT = 64


@pytest.fixture(scope="module")
def long_rope_checkpoint(tmp_path_factory):
    """Served at 512 positions, pretrained at 64: the long factors, and an attention factor derived from 512/64."""
    rope = dict(TINY_FAMILIES["phi3"][1]["rope_parameters"])
    del rope["attention_factor"]
    return save_tiny_checkpoint("phi3", tmp_path_factory.mktemp("phi3-long"), seed=7, rope_parameters=rope,
                                original_max_position_embeddings=SHORT_CONTEXT)


def _error(model, spec, folder, prompt, chunks) -> float:
    (ours,) = run_chunks(model, spec, [prompt], [chunks])
    (reference,) = reference_logits(folder, [prompt])
    return (ours - reference).abs().max().item()


def test_checkpoint_stores_fused_projections(tiny_phi3):
    from safetensors import safe_open

    with safe_open(str(tiny_phi3 / "model.safetensors"), framework="pt") as handle:
        names = set(handle.keys())
    assert "model.layers.0.self_attn.qkv_proj.weight" in names and "model.layers.0.mlp.gate_up_proj.weight" in names
    model, _ = load_model(tiny_phi3, torch.float32, "cpu")
    # the checkpoint's own fused tensors are the weights: no copy, one product each
    assert model.layers[0].self_attn.qkv.fused_weight.shape == (64 + 2 * 32, 64)
    assert model.layers[1].mlp.gate_up.fused_weight.shape == (2 * 112, 64)


def test_long_rope_factors_follow_the_served_context(tiny_phi3, long_rope_checkpoint):
    short = Phi3Config.from_folder(tiny_phi3)
    assert short.rope_scaling["factors"][:2] == [1.0, 1.4] and short.rope_scaling["attention_factor"] == 1.25
    long = Phi3Config.from_folder(long_rope_checkpoint)
    assert long.rope_scaling["factors"][:2] == [3.0, 5.0]
    assert long.rope_scaling["attention_factor"] == pytest.approx((1 + torch.log(torch.tensor(8.0)).item()
                                                                   / torch.log(torch.tensor(64.0)).item()) ** 0.5)
    served = long.serving(SHORT_CONTEXT)
    assert served.rope_scaling["factors"][:2] == [1.0, 1.4] and served.max_position_embeddings == SHORT_CONTEXT
    assert served.rope_scaling["attention_factor"] == long.rope_scaling["attention_factor"]
    raw = json.loads((tiny_phi3 / "config.json").read_text())
    old_style = {key: value for key, value in raw.items() if key != "rope_parameters"}
    old_style["rope_scaling"] = dict(raw["rope_parameters"], type="su")  # the name before transformers 4.43
    del old_style["rope_scaling"]["rope_type"]
    assert Phi3Config.from_dict(old_style).rope_scaling == short.rope_scaling
    for edit, message in (({"partial_rotary_factor": 0.75}, "partial_rotary_factor"),
                          ({"rope_type": "yarn"}, "rope_type 'yarn'"),
                          ({"short_factor": [1.0]}, "short_factor")):
        with pytest.raises(ModelConfigError, match=message):
            Phi3Config.from_dict(dict(raw, rope_parameters=dict(raw["rope_parameters"], **edit)))


def test_long_factors_match_transformers_past_the_original_context(long_rope_checkpoint):
    model, spec = load_model(long_rope_checkpoint, torch.float32, "cpu")
    for seed, length, chunks in ((1, 65, [65]), (2, 100, [40, 50, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])):
        assert _error(model, spec, long_rope_checkpoint, random_prompt(seed, length), chunks) < ATOL


def test_short_sequences_diverge_from_transformers_unless_the_served_context_is_short(long_rope_checkpoint):
    """Served at 512, a 30-token prompt gets the long factors: transformers' logits of a longer sequence it begins,
    not those transformers gives it alone. Served at 64 (max_model_len), it matches transformers alone."""
    prompt = random_prompt(3, 30)
    model, spec = load_model(long_rope_checkpoint, torch.float32, "cpu")
    assert _error(model, spec, long_rope_checkpoint, prompt, [30]) > 0.01
    (ours,) = run_chunks(model, spec, [prompt], [[30]])
    (as_a_prefix,) = reference_logits(long_rope_checkpoint, [prompt + random_prompt(4, 40)])
    assert (ours - as_a_prefix[:30]).abs().max() < ATOL
    short_model, short_spec = load_model(long_rope_checkpoint, torch.float32, "cpu", max_model_len=SHORT_CONTEXT)
    assert short_spec.max_position_embeddings == SHORT_CONTEXT
    assert _error(short_model, short_spec, long_rope_checkpoint, prompt, [20, 10]) < ATOL


def test_engine_with_a_short_max_model_len_matches_transformers(long_rope_checkpoint):
    from engine_fixtures import save_tiny_tokenizer

    save_tiny_tokenizer(long_rope_checkpoint)
    llm = tiny_llm(long_rope_checkpoint, max_model_len=SHORT_CONTEXT)
    params = SamplingParams(temperature=0.0, max_tokens=4, prompt_logprobs=0, return_logits=True, ignore_eos=True)
    [out] = llm.generate([random_prompt(5, 40)], params)
    assert llm.max_model_len == SHORT_CONTEXT
    assert max_logit_error(long_rope_checkpoint, out) < ATOL


def test_sliding_window_on_every_layer(tmp_path):
    folder = save_tiny_checkpoint("phi3", tmp_path, seed=9, sliding_window=12)
    model, spec = load_model(folder, torch.float32, "cpu")
    assert [layer.self_attn.window for layer in model.layers] == [12, 12]
    assert _error(model, spec, folder, random_prompt(8, 60), [33, 27]) < ATOL


def test_engine_prefix_hits_chunked_prefill_and_preemption(tiny_phi3):
    params = SamplingParams(temperature=0.0, max_tokens=4, prompt_logprobs=0, return_logits=True, ignore_eos=True)
    chunked = tiny_llm(tiny_phi3, max_num_batched_tokens=7)
    outs = chunked.generate([random_prompt(11, 23), random_prompt(12, 11)], params)
    assert chunked.stats()["steps"] >= 5

    cached = tiny_llm(tiny_phi3)
    shared = random_prompt(13, 30)
    cached.generate([shared + [7, 8]], SamplingParams(temperature=0.0, max_tokens=1))
    decode_params = SamplingParams(temperature=0.0, max_tokens=4, return_logits=True, ignore_eos=True)
    hits = cached.generate([shared + random_prompt(14, 5), shared + [9]], decode_params)
    assert all(out.metrics.num_cached_tokens == 28 for out in hits)

    small = tiny_llm(tiny_phi3, blocks=12, max_num_seqs=6)
    preempted = small.generate([random_prompt(20 + i, 9 + i) for i in range(6)],
                               SamplingParams(temperature=0.0, max_tokens=10, return_logits=True, ignore_eos=True))
    assert small.stats()["preemptions"] > 0
    for out in outs + hits + preempted:
        assert max_logit_error(tiny_phi3, out) < ATOL
