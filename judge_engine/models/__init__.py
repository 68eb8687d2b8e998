"""Llama-family models and their loading from HF folders and GGUF files."""

from judge_engine.models.config import LlamaFamilyConfig, ModelConfigError
from judge_engine.models.llama import LlamaForCausalLM

__all__ = ["LlamaFamilyConfig", "LlamaForCausalLM", "ModelConfigError", "ModelSpec", "load_model"]

# the loader's names, imported on first use: judge_engine.loading.loader imports judge_engine.models.config, which
# runs this file first, so importing the loader here would close a circle whenever the loader is imported first
_EXPORTS = {"ModelSpec": "judge_engine.loading.loader", "load_model": "judge_engine.loading.loader"}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'judge_engine.models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
