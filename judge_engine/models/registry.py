"""Which model families the engine runs: an HF architecture name -> its config class and its model class, and a
GGUF architecture name -> the HF architecture it converts to.

The loader (loading/loader.py) and the GGUF converter (loading/gguf.py) ask this table and nothing else, so adding
a family is its own module (a config class and a model class, the contract in docs/engine.md) plus one entry in
FAMILIES. Classes are named as "module:Class" and imported on first use: listing a family costs nothing until a
checkpoint of that family is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from judge_engine.models.errors import ModelConfigError


class UnsupportedArchitecture(ModelConfigError):
    """No registered family runs this architecture."""


@dataclass(frozen=True)
class GGUFLayout:
    """How llama.cpp wrote one architecture: the name in its metadata and what the conversion must undo."""
    gguf_architecture: str            # general.architecture in the file
    hf_architecture: str              # config.json "architectures" of the converted folder
    model_type: str                   # config.json "model_type"
    permuted_qk: bool = False         # llama.cpp interleaved the two rotary halves of every Q/K head's rows
    records_attention_bias: bool = False  # config.json says whether q/k/v carry biases (the HF class reads it)
    # llama.cpp per-layer tensor names this family maps to other HF names than the Llama table of loading/gguf.py
    layer_tensors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelFamily:
    architectures: tuple[str, ...]    # config.json "architectures" names the family runs
    config_class: str                 # "module:Class": Class.from_folder(folder, architecture) -> config
    model_class: str                  # "module:Class": Class(config, dtype=, attention_backend=)
    gguf: tuple[GGUFLayout, ...] = ()

    def load_config_class(self) -> Any:
        return _import(self.config_class)

    def load_model_class(self) -> Any:
        return _import(self.model_class)


FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(
        architectures=("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"),
        config_class="judge_engine.models.config:LlamaFamilyConfig",
        model_class="judge_engine.models.llama:LlamaForCausalLM",
        gguf=(GGUFLayout("llama", "LlamaForCausalLM", "llama", permuted_qk=True, records_attention_bias=True),
              GGUFLayout("qwen2", "Qwen2ForCausalLM", "qwen2"),
              GGUFLayout("qwen3", "Qwen3ForCausalLM", "qwen3")),
    ),
    ModelFamily(("Gemma2ForCausalLM",), "judge_engine.models.gemma2:Gemma2Config",
                "judge_engine.models.gemma2:Gemma2ForCausalLM"),
    ModelFamily(("Phi3ForCausalLM",), "judge_engine.models.phi3:Phi3Config",
                "judge_engine.models.phi3:Phi3ForCausalLM"),
)


def supported_architectures() -> tuple[str, ...]:
    return tuple(name for family in FAMILIES for name in family.architectures)


def family_for(architectures: list[str] | tuple[str, ...], source: str = "config.json") -> tuple[ModelFamily, str]:
    """The family of the first listed architecture that one runs, and that architecture's name."""
    for name in architectures or ():
        for family in FAMILIES:
            if name in family.architectures:
                return family, name
    raise UnsupportedArchitecture(
        f"{source}: field 'architectures' is {list(architectures or [])!r}; "
        f"supported: {', '.join(supported_architectures())}")


def gguf_layout(gguf_architecture: Any, source: str) -> GGUFLayout:
    for family in FAMILIES:
        for layout in family.gguf:
            if layout.gguf_architecture == gguf_architecture:
                return layout
    supported = ", ".join(layout.gguf_architecture for family in FAMILIES for layout in family.gguf)
    raise UnsupportedArchitecture(
        f"{source}: metadata field general.architecture is {gguf_architecture!r}; supported: {supported}")


def _import(qualified: str) -> Any:
    module, _, name = qualified.partition(":")
    return getattr(importlib.import_module(module), name)
