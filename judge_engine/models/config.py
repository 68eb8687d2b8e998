"""The subset of an HF config.json that the Llama-family model needs, validated with clear errors."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from judge_engine.models.errors import ModelConfigError
from judge_engine.models.registry import family_for

__all__ = ["LlamaFamilyConfig", "ModelConfigError", "read_config_json", "read_field"]

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")


def read_config_json(folder: Path) -> tuple[dict[str, Any], str]:
    """An HF folder's config.json as a dict, and its path for messages."""
    path = Path(folder) / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")), str(path)
    except FileNotFoundError:
        raise ModelConfigError(f"{path}: not found (expected an HF model folder with config.json)") from None
    except json.JSONDecodeError as error:
        raise ModelConfigError(f"{path}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}") from None


def read_field(raw: dict[str, Any], source: str, name: str, default: Any = ..., kind: type = int) -> Any:
    """``raw[name]`` checked to be a ``kind`` (an int is accepted as a float); ``default`` when absent (none given:
    missing is an error). None passes as None."""
    value = raw.get(name, default)
    if value is ...:
        raise ModelConfigError(f"{source}: field {name!r} is missing")
    if value is not None and kind is float and isinstance(value, int):
        value = float(value)
    if value is not None and not isinstance(value, kind):
        raise ModelConfigError(f"{source}: field {name!r} must be {kind.__name__}, got {value!r}")
    return value


def checked_architecture(config_class: type, raw: dict[str, Any], source: str, architecture: str | None) -> str:
    """The architecture the registry chose, or the one config.json names, which must belong to ``config_class``."""
    if architecture is not None:
        return architecture
    family, architecture = family_for(raw.get("architectures") or [], source)
    if family.config_class != f"{config_class.__module__}:{config_class.__qualname__}":
        raise ModelConfigError(f"{source}: {architecture} is not an architecture of {config_class.__name__}")
    return architecture


def attention_heads(raw: dict[str, Any], source: str) -> tuple[int, int]:
    """(num_attention_heads, num_key_value_heads), the second dividing the first (grouped-query attention)."""
    num_heads = read_field(raw, source, "num_attention_heads")
    num_kv_heads = read_field(raw, source, "num_key_value_heads", num_heads) or num_heads
    if num_heads % num_kv_heads:
        raise ModelConfigError(
            f"{source}: field 'num_key_value_heads' ({num_kv_heads}) must divide num_attention_heads ({num_heads})")
    return num_heads, num_kv_heads


@dataclass(frozen=True)
class LlamaFamilyConfig:
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None  # None for plain RoPE
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    max_position_embeddings: int
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    sliding_window: int | None = None  # every layer sees this many keys (Mistral); None: all of them

    def serving(self, max_model_len: int) -> "LlamaFamilyConfig":
        """This config for an engine that serves at most ``max_model_len`` positions, fewer than config.json's
        (the loader asks; a family whose weights depend on the served context overrides it, models/phi3.py)."""
        return replace(self, max_position_embeddings=max_model_len)

    @classmethod
    def from_folder(cls, folder: Path, architecture: str | None = None) -> "LlamaFamilyConfig":
        """The config of a model folder (config.json, and generation_config.json's end-of-sequence ids), for this
        class and the families built on it; architecture: the one the model registry chose (None: choose it here)."""
        raw, source = read_config_json(folder)
        return cls.from_dict(raw, source=source, folder=folder, architecture=architecture)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json", folder: Path | None = None,
                  architecture: str | None = None) -> "LlamaFamilyConfig":
        def field(name: str, default: Any = ..., kind: type = int) -> Any:
            return read_field(raw, source, name, default, kind)

        architecture = checked_architecture(cls, raw, source, architecture)
        num_heads, num_kv_heads = attention_heads(raw, source)
        hidden_size = field("hidden_size")
        attention_bias = bool(raw.get("attention_bias", False))
        rope_theta, rope_scaling = rope_settings(raw, source)
        eos, bos = eos_and_bos(folder, raw)
        max_positions = field("max_position_embeddings", 2048)
        window = field("sliding_window", None) if architecture == "MistralForCausalLM" else None
        return cls(
            architecture=architecture,
            vocab_size=field("vocab_size"),
            hidden_size=hidden_size,
            intermediate_size=field("intermediate_size"),
            num_layers=field("num_hidden_layers"),
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=field("head_dim", None) or hidden_size // num_heads,
            rms_norm_eps=field("rms_norm_eps", 1e-6, float),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=architecture == "Qwen2ForCausalLM" or attention_bias,
            o_bias=architecture in ("LlamaForCausalLM", "Qwen3ForCausalLM") and attention_bias,
            mlp_bias=architecture == "LlamaForCausalLM" and bool(raw.get("mlp_bias", False)),
            qk_norm=architecture == "Qwen3ForCausalLM",
            max_position_embeddings=max_positions,
            bos_token_id=bos,
            eos_token_ids=eos,
            # a window as long as the context masks nothing: the plain path is the same attention
            sliding_window=window if window and window < max_positions else None,
        )


def eos_and_bos(folder: Path | None, raw: dict[str, Any]) -> tuple[tuple[int, ...], int | None]:
    """The end-of-sequence ids of config.json and generation_config.json, and the BOS id, for a family's config."""
    eos = _ids(raw.get("eos_token_id")) + (_generation_eos(Path(folder)) if folder is not None else [])
    bos = raw.get("bos_token_id")
    return tuple(dict.fromkeys(eos)), bos if isinstance(bos, int) else None


def rope_settings(raw: dict[str, Any], source: str) -> tuple[float, dict[str, Any] | None]:
    """(theta, scaling) of a config.json, for a family whose RoPE is the Llama family's (default, linear, llama3):
    from the transformers 5 ``rope_parameters`` or the older ``rope_theta``/``rope_scaling``."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:
        theta = float(params["rope_theta"])
        scaling = dict(params)
        field_name = "rope_parameters"
    else:
        theta = float(raw.get("rope_theta", 10000.0))
        scaling = dict(raw.get("rope_scaling") or {})
        field_name = "rope_scaling"
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ModelConfigError(
            f"{source}: field {field_name!r} has rope_type {rope_type!r}; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
        )
    if rope_type == "default":
        return theta, None
    if float(scaling.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ModelConfigError(f"{source}: field {field_name!r}: partial_rotary_factor is not supported")
    required = ("factor",) if rope_type == "linear" else ("factor", "low_freq_factor", "high_freq_factor")
    missing = [key for key in required if key not in scaling]
    if missing:
        raise ModelConfigError(f"{source}: field {field_name!r} ({rope_type}) lacks {', '.join(missing)}")
    scaling["rope_type"] = rope_type
    if rope_type == "llama3":
        scaling.setdefault("original_max_position_embeddings", raw.get("max_position_embeddings", 8192))
    return theta, scaling


def _ids(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int)]
    return []


def _generation_eos(folder: Path) -> list[int]:
    path = folder / "generation_config.json"
    if not path.is_file():
        return []
    try:
        return _ids(json.loads(path.read_text(encoding="utf-8")).get("eos_token_id"))
    except json.JSONDecodeError:
        return []
