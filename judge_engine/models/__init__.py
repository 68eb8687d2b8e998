"""Llama-family models and their loading from HF folders and GGUF files."""

from judge_engine.models.config import LlamaFamilyConfig, ModelConfigError
from judge_engine.models.llama import LlamaForCausalLM
from judge_engine.loading.loader import ModelSpec, load_model

__all__ = ["LlamaFamilyConfig", "LlamaForCausalLM", "ModelConfigError", "ModelSpec", "load_model"]
