"""The model registry: the loader and the GGUF converter build whatever family the registry names, so that a new
family is its own module plus one entry."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tiny_models import run_chunks, save_tiny_checkpoint, write_tiny_gguf

from judge_engine.models import registry
from judge_engine.models.config import LlamaFamilyConfig, ModelConfigError
from judge_engine.loading.gguf import GGUFConversionError, converted_folder, hf_tensor_name
from judge_engine.models.llama import LlamaForCausalLM
from judge_engine.loading.loader import load_model
from judge_engine.models.registry import GGUFLayout, ModelFamily, UnsupportedArchitecture

torch.set_num_threads(min(2, torch.get_num_threads()))

ARCHITECTURE = "RecordingLlamaForCausalLM"


class RecordingLlama(LlamaForCausalLM):
    """A family registered by the test: the Llama model, remembering the configs it was built from."""
    built: list[str] = []

    def __init__(self, config, **options):
        super().__init__(config, **options)
        RecordingLlama.built.append(config.architecture)


RECORDING_FAMILY = ModelFamily(
    architectures=(ARCHITECTURE,),
    config_class="judge_engine.models.config:LlamaFamilyConfig",
    model_class=f"{__name__}:RecordingLlama",
    gguf=(GGUFLayout("llama", ARCHITECTURE, "llama", permuted_qk=True, records_attention_bias=True),),
)


@pytest.fixture
def recording_family(monkeypatch, tmp_path):
    """The test family, registered ahead of the built-in ones (its GGUF layout claims llama files)."""
    monkeypatch.setattr(registry, "FAMILIES", (RECORDING_FAMILY, *registry.FAMILIES))
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "cache"))
    RecordingLlama.built.clear()
    return RECORDING_FAMILY


@pytest.mark.parametrize("name", ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"])
def test_the_built_in_architectures_are_the_llama_family(name):
    family, architecture = registry.family_for([name])
    assert architecture == name
    assert family.load_config_class() is LlamaFamilyConfig and family.load_model_class() is LlamaForCausalLM


def test_the_first_listed_architecture_that_runs_is_chosen():
    assert registry.family_for(["GPT2LMHeadModel", "Qwen2ForCausalLM"])[1] == "Qwen2ForCausalLM"


def test_an_unknown_architecture_names_the_supported_ones():
    with pytest.raises(UnsupportedArchitecture, match="supported: LlamaForCausalLM, MistralForCausalLM") as error:
        registry.family_for(["GPT2LMHeadModel"], "m/config.json")
    assert isinstance(error.value, ModelConfigError) and str(error.value).startswith("m/config.json: field")


def test_the_loader_builds_the_class_the_registry_names(tmp_path, recording_family):
    original = save_tiny_checkpoint("llama", tmp_path / "llama")
    renamed = tmp_path / "renamed"
    shutil.copytree(original, renamed)
    config = json.loads((renamed / "config.json").read_text())
    config["architectures"] = [ARCHITECTURE]
    (renamed / "config.json").write_text(json.dumps(config))
    model, spec = load_model(renamed, torch.float32, "cpu")
    assert type(model) is RecordingLlama and RecordingLlama.built == [ARCHITECTURE]
    assert spec.architecture == ARCHITECTURE
    reference, reference_spec = load_model(original, torch.float32, "cpu")
    assert type(reference) is LlamaForCausalLM
    prompts = [[5, 9, 13, 2, 7, 30, 11]]
    assert torch.equal(run_chunks(model, spec, prompts, [[7]])[0],
                       run_chunks(reference, reference_spec, prompts, [[7]])[0])


def test_the_gguf_converter_writes_the_architecture_the_registry_names(tmp_path, recording_family):
    hf = save_tiny_checkpoint("llama", tmp_path / "hf", intermediate_size=128)
    gguf_path = tmp_path / "tiny.gguf"
    write_tiny_gguf(hf, gguf_path, "F32")
    config = json.loads((converted_folder(gguf_path) / "config.json").read_text())
    assert config["architectures"] == [ARCHITECTURE] and config["model_type"] == "llama"
    model, spec = load_model(gguf_path, torch.float32, "cpu")
    assert type(model) is RecordingLlama and spec.architecture == ARCHITECTURE


def test_a_layout_maps_its_own_tensor_names():
    gemma_like = GGUFLayout("x", "XForCausalLM", "x", layer_tensors={"post_ffw_norm": "post_feedforward_layernorm",
                                                                    "ffn_norm": "pre_feedforward_layernorm"})
    plain = GGUFLayout("y", "YForCausalLM", "y")
    assert (hf_tensor_name("blk.3.post_ffw_norm.weight", "f.gguf", gemma_like)
            == "model.layers.3.post_feedforward_layernorm.weight")
    assert hf_tensor_name("blk.3.ffn_norm.weight", "f.gguf", gemma_like) == "model.layers.3.pre_feedforward_layernorm.weight"
    assert hf_tensor_name("blk.3.ffn_norm.weight", "f.gguf", plain) == "model.layers.3.post_attention_layernorm.weight"
    with pytest.raises(GGUFConversionError, match="no counterpart in a YForCausalLM model"):
        hf_tensor_name("blk.3.post_ffw_norm.weight", "f.gguf", plain)


def test_an_unregistered_gguf_architecture_is_refused():
    with pytest.raises(UnsupportedArchitecture, match="general.architecture is 'falcon'; supported: llama, qwen2, qwen3"):
        registry.gguf_layout("falcon", "f.gguf")
