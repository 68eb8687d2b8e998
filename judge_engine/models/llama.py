"""Llama-family decoder (Llama, Mistral, Qwen2, Qwen3) over a flat batch of tokens and a paged KV cache.

Q/K/V and gate/up are MergedLinear maps (one matmul when the weights had to be copied anyway, else the
checkpoint's own tensors without a copy). Parameters are allocated empty (never randomly initialised)
because the checkpoint always overwrites them, which keeps start-up fast.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from judge_engine.layers.attention.backend import AttentionBackend, get_backend
from judge_engine.layers.attention.metadata import AttentionMetadata
from judge_engine.models.config import LlamaFamilyConfig
from judge_engine.models.hidden_capture import HiddenCapture
from judge_engine.layers import row_tiles
from judge_engine.layers.elementwise import silu_and_mul_
from judge_engine.layers.embedding import embedding
from judge_engine.layers.int8_linear import linear
from judge_engine.layers.merged_linear import MergedLinear
from judge_engine.layers.rope import apply_rotary, inverse_frequencies, rotary_cos_sin, rotary_scaling


def _empty(*shape: int, dtype: torch.dtype) -> nn.Parameter:
    return nn.Parameter(torch.empty(*shape, dtype=dtype), requires_grad=False)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As in transformers: normalise in float32, cast back, then scale in the model dtype. The same
    operations in the same order, but on one fresh buffer instead of three (the activations of a
    2048-token step are megabytes, and every fresh buffer is another pass through memory)."""
    x32 = x.to(torch.float32)
    inverse_rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    normalised = x32 * inverse_rms if x32 is x else x32.mul_(inverse_rms)
    return normalised.to(x.dtype).mul_(weight)


@dataclass(frozen=True)
class KeptRows:
    """The rows of the flat batch whose outputs are read after a layer, and the attention of those rows alone."""

    rows: torch.Tensor  # int64 [N]
    meta: AttentionMetadata


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaFamilyConfig, dtype: torch.dtype, *, scale: float | None = None,
                 window: int | None = None, softcap: float | None = None):
        """scale: of the scores (default head_dim ** -0.5); window: a sliding window of this many keys;
        softcap: scores soft-capped at this value (both passed to the attention backend only when set)."""
        super().__init__()
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.eps = config.rms_norm_eps
        self.scale = config.head_dim**-0.5 if scale is None else scale
        self.window = window
        self.softcap = softcap
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        # fused even when the checkpoint's own tensors could be used as they are: a 2048-token step of
        # benchmarks/engine_judge.py's workload replayed through the embedded model ran 6-9% faster (best of 8-10),
        # for 66 MB copied at start-up
        self.qkv = MergedLinear(config.hidden_size, [q_size, kv_size, kv_size], config.qkv_bias, dtype,
                                always_fuse=True)
        self.o_weight = _empty(config.hidden_size, q_size, dtype=dtype)
        self.o_bias = _empty(config.hidden_size, dtype=dtype) if config.o_bias else None
        self.q_norm = _empty(self.head_dim, dtype=dtype) if config.qk_norm else None
        self.k_norm = _empty(self.head_dim, dtype=dtype) if config.qk_norm else None

    def forward(self, x, cos, sin, meta: AttentionMetadata, kv_cache, backend: AttentionBackend,
                keep: KeptRows | None = None) -> torch.Tensor:
        """Stores every token's keys and values; returns the output of the rows ``keep.rows`` (default: all).

        Only the kept rows' queries are attended: the other rows feed nothing but their keys and values."""
        num_tokens = x.shape[0]
        q, k, v = self.qkv(x)
        q_cos, q_sin = cos, sin
        if keep is not None:
            q = q.index_select(0, keep.rows)
            q_cos, q_sin = cos.index_select(0, keep.rows), sin.index_select(0, keep.rows)
        q = q.view(q.shape[0], self.num_heads, self.head_dim)
        k = k.view(num_tokens, self.num_kv_heads, self.head_dim)
        v = v.view(num_tokens, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q = rms_norm(q, self.q_norm, self.eps)
            k = rms_norm(k, self.k_norm, self.eps)
        q = apply_rotary(q, q_cos, q_sin)
        k = apply_rotary(k, cos, sin)
        k_cache, v_cache = kv_cache
        backend.store_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        options = {}
        if self.window is not None:
            options["window"] = self.window
        if self.softcap is not None:
            options["softcap"] = self.softcap
        out = backend.paged_attention(q, k_cache, v_cache, meta if keep is None else keep.meta, self.scale, **options)
        return linear(out.reshape(q.shape[0], self.num_heads * self.head_dim), self.o_weight, self.o_bias)


class LlamaMLP(nn.Module):
    # Rows per pass: the gate/up activations, the widest of a step (2 x intermediate size a row: 147 MB for a
    # 2048-token step of a 1.5B model), exist for this many rows at a time. A multiple of the row tile, so every
    # row meets the same products as in one pass (the same bits); int8 rows are independent anyway.
    ROWS_PER_PASS = 512

    def __init__(self, config: LlamaFamilyConfig, dtype: torch.dtype):
        super().__init__()
        sizes = [config.intermediate_size, config.intermediate_size]
        self.gate_up = MergedLinear(config.hidden_size, sizes, config.mlp_bias, dtype)
        self.down_weight = _empty(config.hidden_size, config.intermediate_size, dtype=dtype)
        self.down_bias = _empty(config.hidden_size, dtype=dtype) if config.mlp_bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= self.ROWS_PER_PASS:
            return self.rows(x)
        out = torch.empty(x.shape[0], self.down_weight.shape[0], dtype=x.dtype, device=x.device)
        for start in range(0, x.shape[0], self.ROWS_PER_PASS):
            out[start:start + self.ROWS_PER_PASS] = self.rows(x[start:start + self.ROWS_PER_PASS])
        return out

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x)
        return linear(silu_and_mul_(gate, up), self.down_weight, self.down_bias)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaFamilyConfig, dtype: torch.dtype):
        super().__init__()
        self.eps = config.rms_norm_eps
        self.input_norm = _empty(config.hidden_size, dtype=dtype)
        self.post_attention_norm = _empty(config.hidden_size, dtype=dtype)
        self.self_attn = LlamaAttention(config, dtype, window=config.sliding_window)
        self.mlp = LlamaMLP(config, dtype)

    def forward(self, x, cos, sin, meta, kv_cache, backend, keep: KeptRows | None = None) -> torch.Tensor:
        """The layer's output for the rows ``keep.rows`` (default: all); every token's keys and values are stored."""
        residual = x if keep is None else x.index_select(0, keep.rows)
        # residual adds land in the sublayer's fresh output (x + y == y + x exactly)
        x = self.self_attn(rms_norm(x, self.input_norm, self.eps), cos, sin, meta, kv_cache, backend,
                           keep).add_(residual)
        return self.mlp(rms_norm(x, self.post_attention_norm, self.eps)).add_(x)


class LlamaForCausalLM(nn.Module):
    """``model(input_ids [T], positions [T], meta, kv_caches, output_rows, capture=None) -> hidden [N, H]``; then
    ``compute_logits``. ``capture`` (a HiddenCapture) also keeps the hidden states of some rows at some layers.

    Other families whose forward pass has this shape subclass it and override the hooks: ``make_layer``,
    ``embed``, ``final_norm``, ``compute_logits`` and ``_checkpoint_targets`` (models/gemma2.py, models/phi3.py).
    """

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
        self.layers = nn.ModuleList(self.make_layer(config, index, dtype) for index in range(config.num_layers))
        self.norm = _empty(config.hidden_size, dtype=dtype)
        untied = not config.tie_word_embeddings
        self.lm_head = _empty(config.vocab_size, config.hidden_size, dtype=dtype) if untied else None
        # set by judge_engine/loading/quantization.py: the LM head's int8 weight, embed_tokens a table whose rows are
        # read on demand (layers/embedding.py), and False once no product needs the flat batch padded to row tiles
        self.logits_head: nn.Module | None = None
        self.pads_row_tiles = True
        inv_freq = inverse_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
        self.register_buffer("inv_freq", inv_freq.to(self.norm.device), persistent=False)
        self.rotary_scaling = rotary_scaling(config.rope_scaling)
        self.attention_backend = attention_backend or get_backend(self.norm.device)

    def make_layer(self, config, index: int, dtype: torch.dtype) -> nn.Module:
        return LlamaDecoderLayer(config, dtype)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return embedding(input_ids, self.embed_tokens)

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.norm, self.config.rms_norm_eps)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        meta: AttentionMetadata,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        output_rows: torch.Tensor | None = None,
        capture: HiddenCapture | None = None,
    ) -> torch.Tensor:
        """Final hidden states of the rows ``output_rows`` of the flat batch (default: all), in that order.

        Every layer stores every token's keys and values, but in the last layer the rows nobody reads feed
        nothing else: its attention, output projection and MLP run on ``output_rows`` only (and on the rows
        ``capture`` asks for when it asks for the final layer). ``capture`` (models/hidden_capture.py) collects
        the hidden states of its rows at its layers; the rows returned are the same with or without it.
        """
        count = input_ids.shape[0]
        computed = output_rows if capture is None else capture.last_layer_rows(output_rows, len(self.layers))
        keep = None
        if computed is not None and computed.numel() < count:  # else every row is read (decode)
            keep = KeptRows(computed, meta.for_rows(computed, positions))
        if self.pads_row_tiles and row_tiles.tiles_float_products(self.norm.dtype):
            input_ids, positions, meta = _pad_to_row_tiles(input_ids, positions, meta)
        x = self.embed(input_ids)
        if capture is not None:
            capture.take(0, x)
        cos, sin = rotary_cos_sin(positions, self.inv_freq, x.dtype, self.rotary_scaling)
        last = len(self.layers) - 1
        for index, (layer, kv_cache) in enumerate(zip(self.layers, kv_caches, strict=True)):
            x = layer(x, cos, sin, meta, kv_cache, self.attention_backend, keep if index == last else None)
            if capture is not None and index < last:
                capture.take(index + 1, x)
        if capture is not None:
            capture.take_final(x, keep is None, self.final_norm, len(self.layers))
        if output_rows is not None and keep is None:
            x = x.index_select(0, output_rows)
        elif output_rows is None:
            x = x[:count]
        elif capture is not None:
            x = capture.output_rows_of(x)
        return self.final_norm(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        weight = self.embed_tokens if self.lm_head is None else self.lm_head
        if self.logits_head is not None:
            weight = self.logits_head
        return linear(hidden, weight).float()

    def load_weights(self, tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Fill the parameters from HF-named checkpoint tensors; raises if any stays unset.

        A tensor that already has the model's dtype and device is adopted without a copy (the
        memory-mapped checkpoint itself); others are converted.
        """
        targets = self._checkpoint_targets()
        filled: set[str] = set()
        for name, tensor in tensors:
            target = targets.get(name)
            if target is None:
                if _ignorable(name):
                    continue
                raise ValueError(f"checkpoint tensor {name!r} has no place in {self.config.architecture}")
            owner, attribute, part = target
            if isinstance(owner, MergedLinear) and part is None:
                owner.load_fused(attribute, tensor, name)
            elif isinstance(owner, MergedLinear):
                owner.load_part(part, attribute, tensor, name)
            else:
                _load_parameter(owner, attribute, tensor, name)
            filled.add(name)
        missing = sorted(set(targets) - filled)
        if missing:
            raise ValueError(f"checkpoint lacks {len(missing)} tensor(s) for {self.config.architecture}: {missing[:6]}")
        for module in self.modules():
            if isinstance(module, MergedLinear):
                module.finish_loading(self.norm.device)

    def _checkpoint_targets(self) -> dict[str, tuple[nn.Module, str, int | None]]:
        """HF tensor name -> (owning module, attribute or part kind, part index of a merged linear; None for a
        merged linear's parts stored as one tensor)."""
        cfg = self.config
        targets: dict[str, tuple[nn.Module, str, int | None]] = {
            "model.embed_tokens.weight": (self, "embed_tokens", None),
            "model.norm.weight": (self, "norm", None),
        }
        if self.lm_head is not None:
            targets["lm_head.weight"] = (self, "lm_head", None)
        for i, layer in enumerate(self.layers):
            prefix, attn, mlp = f"model.layers.{i}.", layer.self_attn, layer.mlp
            targets[prefix + "input_layernorm.weight"] = (layer, "input_norm", None)
            targets[prefix + "post_attention_layernorm.weight"] = (layer, "post_attention_norm", None)
            merged = [(attn.qkv, "self_attn", ("q", "k", "v")), (mlp.gate_up, "mlp", ("gate", "up"))]
            for module, scope, parts in merged:
                for index, kind in module.expected_names():
                    targets[f"{prefix}{scope}.{parts[index]}_proj.{kind}"] = (module, kind, index)
            targets[prefix + "self_attn.o_proj.weight"] = (attn, "o_weight", None)
            if attn.o_bias is not None:
                targets[prefix + "self_attn.o_proj.bias"] = (attn, "o_bias", None)
            if cfg.qk_norm:
                targets[prefix + "self_attn.q_norm.weight"] = (attn, "q_norm", None)
                targets[prefix + "self_attn.k_norm.weight"] = (attn, "k_norm", None)
            targets[prefix + "mlp.down_proj.weight"] = (mlp, "down_weight", None)
            if mlp.down_bias is not None:
                targets[prefix + "mlp.down_proj.bias"] = (mlp, "down_bias", None)
        return targets


def _pad_to_row_tiles(input_ids: torch.Tensor, positions: torch.Tensor,
                      meta: AttentionMetadata) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
    """On the CPU, the flat batch padded to whole row tiles (judge_engine/layers/row_tiles.py) once, so that the
    products of every layer need no copy to pad their input. Padding rows store no keys (slot -1), attend to
    nothing and are never read."""
    extra = row_tiles.tiled_rows(input_ids.shape[0]) - input_ids.shape[0]
    if not row_tiles.uses_row_tiles(input_ids) or extra == 0:
        return input_ids, positions, meta
    slot_mapping = F.pad(meta.slot_mapping, (0, extra), value=-1)
    return F.pad(input_ids, (0, extra)), F.pad(positions, (0, extra)), replace(meta, slot_mapping=slot_mapping)


def _load_parameter(owner: nn.Module, attribute: str, tensor: torch.Tensor, name: str) -> None:
    param = getattr(owner, attribute)
    if param.shape != tensor.shape:
        raise ValueError(f"checkpoint tensor {name!r} has shape {tuple(tensor.shape)}, expected {tuple(param.shape)}")
    if tensor.dtype == param.dtype and tensor.device == param.device:
        param.data = tensor  # adopt the memory-mapped tensor: no copy
    else:
        param.data.copy_(tensor)


def _ignorable(name: str) -> bool:
    """Tensors some checkpoints carry that the forward pass never uses."""
    return name == "lm_head.weight" or name.endswith("rotary_emb.inv_freq")
