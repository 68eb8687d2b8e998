"""GGUF conversion: tiny GGUF files written here with llama.cpp's layout, and the embedded SmolLM2 file
checked against transformers' own GGUF loader."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tiny_models import embedded_model, run_chunks, save_tiny_checkpoint, write_tiny_gguf  # noqa: F401

from judge_engine.models import load_model
from judge_engine.loading.gguf import GGUFConversionError, converted_folder, llama3_scaling_from_factors
from judge_engine.layers.rope import inverse_frequencies

torch.set_num_threads(min(2, torch.get_num_threads()))

# intermediate 128: the block formats quantize rows in blocks of 32 values
GGUF_FAMILIES = {family: {"intermediate_size": 128} for family in ("llama", "qwen2", "qwen3")}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("family", sorted(GGUF_FAMILIES))
def test_f32_gguf_converts_back_to_the_original_checkpoint(tmp_path, family):
    hf = save_tiny_checkpoint(family, tmp_path / "hf", **GGUF_FAMILIES[family])
    gguf_path = tmp_path / "tiny.gguf"
    write_tiny_gguf(hf, gguf_path, "F32")
    folder = converted_folder(gguf_path)
    original, converted = load_file(hf / "model.safetensors"), load_file(folder / "model.safetensors")
    assert sorted(converted) == sorted(original)
    for name, array in original.items():
        assert np.array_equal(converted[name], array), name
    config, source = json.loads((folder / "config.json").read_text()), json.loads((hf / "config.json").read_text())
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "rms_norm_eps"):
        assert config[key] == source[key], key
    assert config["rope_theta"] == source["rope_parameters"]["rope_theta"]
    assert config["tie_word_embeddings"] == source["tie_word_embeddings"]
    assert config["architectures"] == source["architectures"]
    prompt = [[5, 9, 200, 17, 3, 80, 81]]
    model_hf, spec = load_model(hf, torch.float32, "cpu")
    model_gguf, _ = load_model(gguf_path, torch.float32, "cpu")
    assert torch.equal(run_chunks(model_hf, spec, prompt, [[7]])[0], run_chunks(model_gguf, spec, prompt, [[7]])[0])


@pytest.mark.parametrize("quant", ["F16", "Q8_0", "Q4_0", "Q4_1", "Q5_1"])
def test_quantized_tensors_are_dequantized_and_unpermuted(tmp_path, quant):
    hf = save_tiny_checkpoint("llama", tmp_path / "hf", intermediate_size=128)
    gguf_path = tmp_path / f"tiny-{quant}.gguf"
    expected = write_tiny_gguf(hf, gguf_path, quant)
    converted = load_file(converted_folder(gguf_path) / "model.safetensors")
    for name, array in expected.items():
        assert converted[name].dtype == np.float32
        assert np.array_equal(converted[name], array), name


def test_conversion_is_cached_by_content(tmp_path, monkeypatch):
    hf = save_tiny_checkpoint("qwen3", tmp_path / "hf", intermediate_size=128)
    gguf_path = tmp_path / "a.gguf"
    write_tiny_gguf(hf, gguf_path, "Q8_0")
    first = converted_folder(gguf_path)
    copy = tmp_path / "b.gguf"
    copy.write_bytes(gguf_path.read_bytes())

    def must_not_convert(*args):
        raise AssertionError("converted twice")

    monkeypatch.setattr("judge_engine.loading.gguf.convert_gguf", must_not_convert)
    assert converted_folder(gguf_path) == first
    assert converted_folder(copy) == first, "the cache key is the content hash, not the path"


def test_unsupported_architecture_is_rejected(tmp_path):
    import gguf

    path = tmp_path / "falcon.gguf"
    writer = gguf.GGUFWriter(str(path), arch="falcon")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFConversionError, match="general.architecture is 'falcon'"):
        converted_folder(path)
    assert not list((tmp_path / "cache" / "converted").glob(".converting-*")), "staging folder left behind"


def test_llama3_rope_factors_are_recognised():
    config = {"head_dim": 64, "rope_theta": 500000.0}
    scaling = {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    factors = (inverse_frequencies(64, 500000.0, None) / inverse_frequencies(64, 500000.0, scaling)).numpy()
    assert llama3_scaling_from_factors(factors, config, "x.gguf") == scaling
    with pytest.raises(GGUFConversionError, match="rope_freqs"):
        llama3_scaling_from_factors(np.linspace(1, 8, 32), config, "x.gguf")


@pytest.mark.slow
def test_embedded_gguf_matches_transformers_gguf_loader(embedded_model):
    """Dequantization and Q/K un-permutation agree with transformers' reading of the same file."""
    import transformers

    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(embedded_model.gguf.parent), gguf_file=embedded_model.gguf.name, dtype=torch.float32
    ).state_dict()
    ours = load_file(embedded_model.folder / "model.safetensors")
    assert set(ours) <= set(reference)
    assert set(reference) - set(ours) <= {"lm_head.weight"}  # tied: transformers lists the shared tensor twice
    for name, array in ours.items():
        assert np.array_equal(array, reference[name].numpy()), name
