"""Phi-3 (and Phi-3.5-mini): the Llama decoder with Q/K/V and gate/up each stored as one fused tensor, long-rope
scaling, and a sliding window on every layer when config.json sets one.

Long-rope has two sets of per-dimension factors: transformers takes the short ones while a forward pass's
sequence is at most ``original_max_position_embeddings`` long, the long ones beyond (and recomputes the whole
cache when a generation crosses that length). A paged cache cannot recompute what it holds, so the engine
chooses once, as vLLM does, by the context it serves: ``max_position_embeddings`` (lowered by the loader to an
engine's ``max_model_len``) above the original context takes the long factors for every sequence. Sequences no
longer than the original context then get other logits than transformers gives them on their own (those of a
longer sequence they begin); with a served context within the original one, every sequence matches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from judge_engine.models.config import (LlamaFamilyConfig, ModelConfigError, attention_heads, checked_architecture,
                                        eos_and_bos, read_field)
from judge_engine.models.llama import LlamaForCausalLM

ROPE_TYPES = ("default", "longrope")


@dataclass(frozen=True)
class Phi3Config(LlamaFamilyConfig):
    original_max_position_embeddings: int | None = None  # long-rope's pretraining context (None: no long-rope)
    long_rope_scalings: tuple[dict[str, Any], dict[str, Any]] | None = None  # (short, long)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json", folder: Path | None = None,
                  architecture: str | None = None) -> "Phi3Config":
        def field(name: str, default: Any = ..., kind: type = int) -> Any:
            return read_field(raw, source, name, default, kind)

        architecture = checked_architecture(cls, raw, source, architecture)
        hidden = field("hidden_size")
        num_heads, num_kv_heads = attention_heads(raw, source)
        if raw.get("hidden_act", "silu") != "silu":
            raise ModelConfigError(f"{source}: field 'hidden_act' is {raw['hidden_act']!r}; supported: silu")
        head_dim = field("head_dim", None) or hidden // num_heads
        max_positions = field("max_position_embeddings", 4096)
        rope_theta, scalings, original = _long_rope(raw, source, head_dim, max_positions)
        window = field("sliding_window", None)
        eos, bos = eos_and_bos(folder, raw)
        return cls(
            architecture=architecture,
            vocab_size=field("vocab_size"),
            hidden_size=hidden,
            intermediate_size=field("intermediate_size"),
            num_layers=field("num_hidden_layers"),
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            rms_norm_eps=field("rms_norm_eps", 1e-5, float),
            rope_theta=rope_theta,
            rope_scaling=None if scalings is None else scalings[max_positions > original],
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=False,
            o_bias=False,
            mlp_bias=False,
            qk_norm=False,
            max_position_embeddings=max_positions,
            bos_token_id=bos,
            eos_token_ids=eos,
            # a window as long as the context masks nothing: the plain path is the same attention
            sliding_window=window if window and window < max_positions else None,
            original_max_position_embeddings=original,
            long_rope_scalings=scalings,
        )

    def serving(self, max_model_len: int) -> "Phi3Config":
        """This config for an engine that serves at most ``max_model_len`` positions (fewer than config.json's):
        the long-rope factors are chosen for that context."""
        config = super().serving(max_model_len)
        if self.long_rope_scalings is None:
            return config
        long = config.max_position_embeddings > self.original_max_position_embeddings
        return replace(config, rope_scaling=self.long_rope_scalings[long])


def _long_rope(raw: dict[str, Any], source: str, head_dim: int,
               max_positions: int) -> tuple[float, tuple[dict[str, Any], dict[str, Any]] | None, int | None]:
    """(theta, the short and long rope scalings layers/rope.py computes, the original context); the attention
    factor as transformers derives it."""
    params = raw.get("rope_parameters")
    if not (isinstance(params, dict) and "rope_theta" in params):
        params = dict(raw.get("rope_scaling") or {}, rope_theta=raw.get("rope_theta", 10000.0))
    theta = float(params["rope_theta"])
    rope_type = params.get("rope_type", params.get("type", "default"))
    rope_type = "longrope" if rope_type == "su" else rope_type  # its name before transformers 4.43
    if rope_type not in ROPE_TYPES:
        raise ModelConfigError(
            f"{source}: rope_type {rope_type!r} is not supported; supported: {', '.join(ROPE_TYPES)}")
    if float(params.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ModelConfigError(f"{source}: partial_rotary_factor is not supported")
    if rope_type == "default":
        return theta, None, None
    original = params.get("original_max_position_embeddings") or raw.get("original_max_position_embeddings")
    if not isinstance(original, int):
        raise ModelConfigError(f"{source}: long-rope needs original_max_position_embeddings")
    for name in ("short_factor", "long_factor"):
        if not isinstance(params.get(name), list) or len(params[name]) != head_dim // 2:
            raise ModelConfigError(f"{source}: long-rope's {name} must list {head_dim // 2} numbers")
    # transformers takes the ratio of config.json's own contexts, whatever context is served
    factor = params.get("factor") or max_positions / original
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    short, long = ({"rope_type": "longrope", "factors": [float(f) for f in params[name]],
                    "attention_factor": float(attention_factor)} for name in ("short_factor", "long_factor"))
    return theta, (short, long), original


class Phi3ForCausalLM(LlamaForCausalLM):
    def _checkpoint_targets(self):
        targets = super()._checkpoint_targets()
        for i, layer in enumerate(self.layers):
            prefix = f"model.layers.{i}."
            for part in ("self_attn.q", "self_attn.k", "self_attn.v", "mlp.gate", "mlp.up"):
                del targets[f"{prefix}{part}_proj.weight"]
            targets[prefix + "self_attn.qkv_proj.weight"] = (layer.self_attn.qkv, "weight", None)
            targets[prefix + "mlp.gate_up_proj.weight"] = (layer.mlp.gate_up, "weight", None)
        return targets
