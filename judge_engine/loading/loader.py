"""Load a model from an HF folder (config.json + safetensors) or a .gguf file, its family found in the registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from judge_engine.loading.skeleton import model_skeleton
from judge_engine.loading.weight_source import is_gguf_file, weight_source


@dataclass(frozen=True)
class ModelSpec:
    architecture: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    sliding_window: int | None = None  # every layer attends only this many keys (None: some or all see all)
    intermediate_size: int | None = None  # the MLP's width: with the others, what a token's linear maps cost

    @classmethod
    def from_config(cls, config) -> "ModelSpec":
        """From any family's config class: each provides these fields (docs/engine.md, adding a family)."""
        return cls(
            architecture=config.architecture,
            num_layers=config.num_layers,
            num_heads=config.num_heads,
            num_kv_heads=config.num_kv_heads,
            head_dim=config.head_dim,
            hidden_size=config.hidden_size,
            vocab_size=config.vocab_size,
            max_position_embeddings=config.max_position_embeddings,
            eos_token_ids=config.eos_token_ids,
            bos_token_id=config.bos_token_id,
            # optional in a family's config: only a model whose every layer is windowed sets it
            sliding_window=getattr(config, "sliding_window", None),
            intermediate_size=getattr(config, "intermediate_size", None),
        )

    def layer_weights(self) -> int | None:
        """The weights of one layer's linear maps (q, k, v, o and the MLP's gate, up, down, in every family): 2 FLOPs
        each per token; None when the config lacks the MLP's width."""
        if self.intermediate_size is None:
            return None
        query, key_value = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return self.hidden_size * (2 * query + 2 * key_value) + 3 * self.hidden_size * self.intermediate_size


def model_folder(path: str | Path, cache_dir: str | Path | None = None, float_weights: bool = True) -> Path:
    """The HF folder of the model at ``path``: ``path`` itself, or the conversion of a .gguf file cached under
    ``cache_dir`` (None: the engine's cache, judge_engine/loading/cache.py): its config.json and tokenizer, and with
    ``float_weights`` its float32 safetensors."""
    return weight_source(path, cache_dir, float_weights).folder


def load_model(
    path: str | Path,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    attention_backend: str | None = None,
    cache_dir: str | Path | None = None,
    max_model_len: int | None = None,
    quantization: str | None = None,
) -> tuple[nn.Module, ModelSpec]:
    """Build the model on ``device`` in ``dtype`` and fill it from the checkpoint (a .gguf is converted once, into
    ``cache_dir``). The registry (models/registry.py) names the config and model classes of its architecture.
    ``max_model_len`` below config.json's context: the model is built for that context (``config.serving``; it
    picks Phi-3's long-rope factors), and the spec reports it. ``quantization`` "int8" or "int8-weights": the
    linear maps run int8 (W8A8) or int8 weights with float activations (W8A32)
    (judge_engine/loading/quantization.py), their weights read from its disk cache or quantized into it now, one
    checkpoint tensor at a time; a .gguf's float32 weights are then never written (weight_source.py). A .gguf
    run on the CPU keeps its linear maps in the file's block formats (loading/gguf_resident.py: the
    float32 model's results to the bit, at about the file's memory) unless JUDGE_ENGINE_GGUF_WEIGHTS=float32."""
    device = torch.device(device)
    blocks = quantization is None and _keeps_gguf_blocks(path, device)
    weights = weight_source(path, cache_dir, float_weights=quantization is None and not blocks)
    model, config = model_skeleton(weights.folder, dtype, device, attention_backend, max_model_len)
    with torch.no_grad():
        if blocks:
            from judge_engine.loading.gguf_resident import load_gguf_resident

            load_gguf_resident(model, weights)
        elif quantization is None:
            model.load_weights((tensor.name, tensor.load()) for tensor in weights.tensors())
        else:
            from judge_engine.loading.quantization import load_quantized

            model.quantized_from = load_quantized(model, weights, cache_dir, quantization)  # "cache" or "built"
    return model.eval(), ModelSpec.from_config(config)


def _keeps_gguf_blocks(path: str | Path, device: torch.device) -> bool:
    """A .gguf on the CPU: its linear maps stay in their blocks, unless the environment asks for the float32 copy
    (CUDA reads the float32 conversion, as before)."""
    from judge_engine.loading.gguf_resident import gguf_weights_choice

    return is_gguf_file(path) and device.type == "cpu" and gguf_weights_choice() == "blocks"
