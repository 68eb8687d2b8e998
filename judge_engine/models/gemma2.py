"""Gemma 2: the Llama-shaped decoder with embeddings scaled by sqrt(hidden), (1 + w) RMS norms before and after
both sublayers, a GeGLU MLP, scores scaled by query_pre_attn_scalar, soft-capped attention scores and logits,
and a sliding window on the layers config.json's ``layer_types`` names (every other one, from the first).

The KV cache keeps every block of a Gemma 2 sequence: its full-attention layers read all of them, so the
block freeing of all-windowed models (BlockManager.free_blocks_outside_window) never applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from judge_engine.models.config import (LlamaFamilyConfig, ModelConfigError, attention_heads, checked_architecture,
                                        eos_and_bos, read_field, rope_settings)
from judge_engine.layers.elementwise import apply_blockwise
from judge_engine.models.llama import KeptRows, LlamaAttention, LlamaForCausalLM, LlamaMLP, _empty
from judge_engine.layers.embedding import embedding
from judge_engine.layers.int8_linear import linear

# config.json hidden_activation -> F.gelu's approximate
GELU_APPROXIMATIONS = {"gelu_pytorch_tanh": "tanh", "gelu": "none"}
LAYER_TYPES = ("sliding_attention", "full_attention")


@dataclass(frozen=True)
class Gemma2Config(LlamaFamilyConfig):
    query_pre_attn_scalar: float = 256.0
    layer_windows: tuple[int | None, ...] = ()  # per layer: its sliding window, None for full attention
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    gelu_approximate: str = "tanh"

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json", folder: Path | None = None,
                  architecture: str | None = None) -> "Gemma2Config":
        def field(name: str, default: Any = ..., kind: type = int) -> Any:
            return read_field(raw, source, name, default, kind)

        architecture = checked_architecture(cls, raw, source, architecture)
        num_layers, hidden = field("num_hidden_layers"), field("hidden_size")
        num_heads, num_kv_heads = attention_heads(raw, source)
        activation = raw.get("hidden_activation") or raw.get("hidden_act") or "gelu_pytorch_tanh"
        if activation not in GELU_APPROXIMATIONS:
            raise ModelConfigError(f"{source}: field 'hidden_activation' is {activation!r}; "
                                   f"supported: {', '.join(GELU_APPROXIMATIONS)}")
        rope_theta, rope_scaling = rope_settings(raw, source)
        max_positions = field("max_position_embeddings", 8192)
        attention_bias = bool(raw.get("attention_bias", False))
        eos, bos = eos_and_bos(folder, raw)
        return cls(
            architecture=architecture,
            vocab_size=field("vocab_size"),
            hidden_size=hidden,
            intermediate_size=field("intermediate_size"),
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=field("head_dim", None) or hidden // num_heads,
            rms_norm_eps=field("rms_norm_eps", 1e-6, float),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
            qkv_bias=attention_bias,
            o_bias=attention_bias,
            mlp_bias=False,
            qk_norm=False,
            max_position_embeddings=max_positions,
            bos_token_id=bos,
            eos_token_ids=eos,
            query_pre_attn_scalar=field("query_pre_attn_scalar", 256, float),
            layer_windows=_layer_windows(raw, source, num_layers, field("sliding_window", None), max_positions),
            attn_logit_softcapping=field("attn_logit_softcapping", None, float),
            final_logit_softcapping=field("final_logit_softcapping", None, float),
            gelu_approximate=GELU_APPROXIMATIONS[activation],
        )


def _layer_windows(raw: dict[str, Any], source: str, num_layers: int, window: int | None,
                   max_positions: int) -> tuple[int | None, ...]:
    # configs written before transformers recorded layer_types meant the same alternation, sliding first
    types = raw.get("layer_types") or [LAYER_TYPES[i % 2] for i in range(num_layers)]
    if len(types) != num_layers or any(kind not in LAYER_TYPES for kind in types):
        raise ModelConfigError(f"{source}: field 'layer_types' must list {num_layers} of {', '.join(LAYER_TYPES)}")
    # a window as long as the context masks nothing: the plain path is the same attention
    if not window or window >= max_positions:
        window = None
    return tuple(window if kind == "sliding_attention" else None for kind in types)


def gemma_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As transformers' Gemma2RMSNorm: normalise and scale by (1 + w) in float32, then cast back."""
    x32 = x.to(torch.float32)
    inverse_rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    normalised = x32 * inverse_rms if x32 is x else x32.mul_(inverse_rms)
    return normalised.mul_(1.0 + weight.float()).to(x.dtype)


def soft_cap(x: torch.Tensor, cap: float) -> torch.Tensor:
    return apply_blockwise(torch.tanh, x / cap).mul_(cap)


class GeGLU(LlamaMLP):
    def __init__(self, config: Gemma2Config, dtype: torch.dtype):
        super().__init__(config, dtype)
        self.approximate = config.gelu_approximate

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x)
        activated = apply_blockwise(lambda t: F.gelu(t, approximate=self.approximate), gate)
        return linear(activated.mul_(up), self.down_weight, self.down_bias)


class Gemma2DecoderLayer(nn.Module):
    def __init__(self, config: Gemma2Config, dtype: torch.dtype, window: int | None):
        super().__init__()
        self.eps = config.rms_norm_eps
        self.input_norm = _empty(config.hidden_size, dtype=dtype)
        self.post_attention_norm = _empty(config.hidden_size, dtype=dtype)
        self.pre_feedforward_norm = _empty(config.hidden_size, dtype=dtype)
        self.post_feedforward_norm = _empty(config.hidden_size, dtype=dtype)
        self.self_attn = LlamaAttention(config, dtype, scale=config.query_pre_attn_scalar**-0.5, window=window,
                                        softcap=config.attn_logit_softcapping)
        self.mlp = GeGLU(config, dtype)

    def forward(self, x, cos, sin, meta, kv_cache, backend, keep: KeptRows | None = None) -> torch.Tensor:
        residual = x if keep is None else x.index_select(0, keep.rows)
        attended = self.self_attn(gemma_rms_norm(x, self.input_norm, self.eps), cos, sin, meta, kv_cache, backend,
                                  keep)
        x = gemma_rms_norm(attended, self.post_attention_norm, self.eps).add_(residual)
        fed = self.mlp(gemma_rms_norm(x, self.pre_feedforward_norm, self.eps))
        return gemma_rms_norm(fed, self.post_feedforward_norm, self.eps).add_(x)


class Gemma2ForCausalLM(LlamaForCausalLM):
    def __init__(self, config: Gemma2Config, dtype: torch.dtype = torch.float32, attention_backend=None):
        super().__init__(config, dtype, attention_backend)
        # transformers rounds sqrt(hidden) to the model's dtype before multiplying
        self.embed_scale = torch.tensor(math.sqrt(config.hidden_size), dtype=dtype).item()

    def make_layer(self, config: Gemma2Config, index: int, dtype: torch.dtype) -> nn.Module:
        return Gemma2DecoderLayer(config, dtype, config.layer_windows[index])

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return embedding(input_ids, self.embed_tokens).mul_(self.embed_scale)

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return gemma_rms_norm(x, self.norm, self.config.rms_norm_eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = super().compute_logits(hidden)
        cap = self.config.final_logit_softcapping
        return logits if cap is None else soft_cap(logits, cap)

    def _checkpoint_targets(self):
        targets = super()._checkpoint_targets()
        for i, layer in enumerate(self.layers):
            targets[f"model.layers.{i}.pre_feedforward_layernorm.weight"] = (layer, "pre_feedforward_norm", None)
            targets[f"model.layers.{i}.post_feedforward_layernorm.weight"] = (layer, "post_feedforward_norm", None)
        return targets
