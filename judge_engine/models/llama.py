"""Llama-family decoder (Llama, Mistral, Qwen2, Qwen3) over a flat batch of tokens and a paged KV cache.

Q, K and V share one matmul and gate/up share another; the checkpoint's separate tensors are copied into
slices of the fused weights by ``load_weights``. Parameters are allocated empty (never randomly
initialised) because they are always overwritten by the checkpoint, which keeps start-up fast.
"""

from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from judge_engine.attention.backend import AttentionBackend, get_backend
from judge_engine.attention.metadata import AttentionMetadata
from judge_engine.models.config import LlamaFamilyConfig
from judge_engine.models.rope import apply_rotary, inverse_frequencies, rotary_cos_sin


def _empty(*shape: int, dtype: torch.dtype) -> nn.Parameter:
    return nn.Parameter(torch.empty(*shape, dtype=dtype), requires_grad=False)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As in transformers: normalise in float32, cast back, then scale in the model dtype."""
    x32 = x.to(torch.float32)
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaFamilyConfig, dtype: torch.dtype):
        super().__init__()
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.eps = config.rms_norm_eps
        self.scale = config.head_dim**-0.5
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self.qkv_weight = _empty(q_size + 2 * kv_size, config.hidden_size, dtype=dtype)
        self.qkv_bias = _empty(q_size + 2 * kv_size, dtype=dtype) if config.qkv_bias else None
        self.o_weight = _empty(config.hidden_size, q_size, dtype=dtype)
        self.o_bias = _empty(config.hidden_size, dtype=dtype) if config.o_bias else None
        self.q_norm = _empty(self.head_dim, dtype=dtype) if config.qk_norm else None
        self.k_norm = _empty(self.head_dim, dtype=dtype) if config.qk_norm else None

    def forward(self, x, cos, sin, meta: AttentionMetadata, kv_cache, backend: AttentionBackend) -> torch.Tensor:
        num_tokens = x.shape[0]
        qkv = F.linear(x, self.qkv_weight, self.qkv_bias).view(num_tokens, -1, self.head_dim)
        q, k, v = qkv.split([self.num_heads, self.num_kv_heads, self.num_kv_heads], dim=1)
        if self.q_norm is not None:
            q = rms_norm(q, self.q_norm, self.eps)
            k = rms_norm(k, self.k_norm, self.eps)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        k_cache, v_cache = kv_cache
        backend.store_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        out = backend.paged_attention(q, k_cache, v_cache, meta, self.scale)
        return F.linear(out.reshape(num_tokens, -1), self.o_weight, self.o_bias)


class LlamaMLP(nn.Module):
    def __init__(self, config: LlamaFamilyConfig, dtype: torch.dtype):
        super().__init__()
        self.gate_up_weight = _empty(2 * config.intermediate_size, config.hidden_size, dtype=dtype)
        self.gate_up_bias = _empty(2 * config.intermediate_size, dtype=dtype) if config.mlp_bias else None
        self.down_weight = _empty(config.hidden_size, config.intermediate_size, dtype=dtype)
        self.down_bias = _empty(config.hidden_size, dtype=dtype) if config.mlp_bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(x, self.gate_up_weight, self.gate_up_bias).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.down_weight, self.down_bias)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaFamilyConfig, dtype: torch.dtype):
        super().__init__()
        self.eps = config.rms_norm_eps
        self.input_norm = _empty(config.hidden_size, dtype=dtype)
        self.post_attention_norm = _empty(config.hidden_size, dtype=dtype)
        self.self_attn = LlamaAttention(config, dtype)
        self.mlp = LlamaMLP(config, dtype)

    def forward(self, x, cos, sin, meta, kv_cache, backend) -> torch.Tensor:
        x = x + self.self_attn(rms_norm(x, self.input_norm, self.eps), cos, sin, meta, kv_cache, backend)
        return x + self.mlp(rms_norm(x, self.post_attention_norm, self.eps))


class LlamaForCausalLM(nn.Module):
    """``model(input_ids [T], positions [T], meta, kv_caches) -> hidden [T, H]``; ``compute_logits(hidden) -> float32``."""

    def __init__(
        self,
        config: LlamaFamilyConfig,
        dtype: torch.dtype = torch.float32,
        attention_backend: AttentionBackend | None = None,
    ):
        """Parameters are allocated (uninitialised) on the current default device, e.g. ``with torch.device(d):``."""
        super().__init__()
        self.config = config
        self.embed_tokens = _empty(config.vocab_size, config.hidden_size, dtype=dtype)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, dtype) for _ in range(config.num_layers))
        self.norm = _empty(config.hidden_size, dtype=dtype)
        self.lm_head = None if config.tie_word_embeddings else _empty(config.vocab_size, config.hidden_size, dtype=dtype)
        inv_freq = inverse_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
        self.register_buffer("inv_freq", inv_freq.to(self.norm.device), persistent=False)
        self.attention_backend = attention_backend or get_backend(self.norm.device)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        meta: AttentionMetadata,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> torch.Tensor:
        x = F.embedding(input_ids, self.embed_tokens)
        cos, sin = rotary_cos_sin(positions, self.inv_freq, x.dtype)
        for layer, kv_cache in zip(self.layers, kv_caches, strict=True):
            x = layer(x, cos, sin, meta, kv_cache, self.attention_backend)
        return rms_norm(x, self.norm, self.config.rms_norm_eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        weight = self.embed_tokens if self.lm_head is None else self.lm_head
        return F.linear(hidden, weight).float()

    def load_weights(self, tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy HF-named checkpoint tensors into the (fused) parameters; raises if any parameter stays unset."""
        targets = self._checkpoint_targets()
        filled: set[str] = set()
        for name, tensor in tensors:
            target = targets.get(name)
            if target is None:
                if _ignorable(name):
                    continue
                raise ValueError(f"checkpoint tensor {name!r} has no place in {self.config.architecture}")
            _, param, start = target
            destination = param.data if start is None else param.data[start : start + tensor.shape[0]]
            if destination.shape != tensor.shape:
                raise ValueError(
                    f"checkpoint tensor {name!r} has shape {tuple(tensor.shape)}, expected {tuple(destination.shape)}"
                )
            if start is None and tensor.dtype == param.dtype and tensor.device == param.device:
                # Adopt the (memory-mapped) checkpoint tensor as is: no copy, so start-up stays fast.
                param.data = tensor
            else:
                destination.copy_(tensor)
            filled.add(name)
        missing = sorted(set(targets) - filled)
        if missing:
            raise ValueError(f"checkpoint lacks {len(missing)} tensor(s) for {self.config.architecture}: {missing[:6]}")

    def _checkpoint_targets(self) -> dict[str, tuple[str, nn.Parameter, int | None]]:
        """HF tensor name -> (parameter name, parameter, first row in the fused parameter)."""
        cfg = self.config
        q_rows, kv_rows = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        targets: dict[str, tuple[str, nn.Parameter, int | None]] = {
            "model.embed_tokens.weight": ("embed_tokens", self.embed_tokens, None),
            "model.norm.weight": ("norm", self.norm, None),
        }
        if self.lm_head is not None:
            targets["lm_head.weight"] = ("lm_head", self.lm_head, None)
        for i, layer in enumerate(self.layers):
            prefix, attn, mlp = f"model.layers.{i}.", layer.self_attn, layer.mlp
            targets[prefix + "input_layernorm.weight"] = ("input_norm", layer.input_norm, None)
            targets[prefix + "post_attention_layernorm.weight"] = ("post_attention_norm", layer.post_attention_norm, None)
            for part, start in (("q", 0), ("k", q_rows), ("v", q_rows + kv_rows)):
                targets[f"{prefix}self_attn.{part}_proj.weight"] = ("qkv_weight", attn.qkv_weight, start)
                if attn.qkv_bias is not None:
                    targets[f"{prefix}self_attn.{part}_proj.bias"] = ("qkv_bias", attn.qkv_bias, start)
            targets[prefix + "self_attn.o_proj.weight"] = ("o_weight", attn.o_weight, None)
            if attn.o_bias is not None:
                targets[prefix + "self_attn.o_proj.bias"] = ("o_bias", attn.o_bias, None)
            if attn.q_norm is not None:
                targets[prefix + "self_attn.q_norm.weight"] = ("q_norm", attn.q_norm, None)
                targets[prefix + "self_attn.k_norm.weight"] = ("k_norm", attn.k_norm, None)
            for part, start in (("gate", 0), ("up", cfg.intermediate_size)):
                targets[f"{prefix}mlp.{part}_proj.weight"] = ("gate_up_weight", mlp.gate_up_weight, start)
                if mlp.gate_up_bias is not None:
                    targets[f"{prefix}mlp.{part}_proj.bias"] = ("gate_up_bias", mlp.gate_up_bias, start)
            targets[prefix + "mlp.down_proj.weight"] = ("down_weight", mlp.down_weight, None)
            if mlp.down_bias is not None:
                targets[prefix + "mlp.down_proj.bias"] = ("down_bias", mlp.down_bias, None)
        return targets


def _ignorable(name: str) -> bool:
    """Tensors some checkpoints carry that the forward pass never uses."""
    return name == "lm_head.weight" or name.endswith("rotary_emb.inv_freq")
