"""Engine options, validated once so that a bad value fails at start-up with the field's name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from judge_engine.loading.dtype_choice import resolve_dtype

# On CPU there is no free-memory reading to size the cache from; 512 MiB holds ~11k tokens of the embedded
# 135M model in float32, enough for a judging batch of dozens of long shared-prefix prompts.
DEFAULT_CPU_KV_CACHE_BYTES = 512 * 1024 * 1024

# Tokens per KV block when none is given. Judging prompts share all but a short tail (the criterion), so the
# private part of a sequence is a few blocks and the half-empty last one is a real share of it: on the CPU,
# 8-token blocks halve that waste and share the prefix at a finer grain (benchmarks/engine_judge.py: 1.7% of
# the slots unused at the peak, against 4.7% with 16). The Triton kernels tile keys by block, and 16 suits them.
DEFAULT_BLOCK_SIZE = {"cpu": 8, "cuda": 16}

SUPPORTED_DTYPES = ("float32", "bfloat16")


class EngineConfigError(ValueError):
    """An engine option has an invalid value; the message names the option."""


@dataclass
class EngineConfig:
    model: str | Path | None = None
    dtype: str | None = None  # None or "auto": the hardware's choice (judge_engine/loading/dtype_choice.py); resolved here
    device: str = "cpu"
    block_size: int | None = None  # None: DEFAULT_BLOCK_SIZE for the device
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    # while a step serves a short request (a decode, a prompt with at most four such chunks left), a long prompt
    # computes at most this many tokens' worth in it (judge_engine/engine/step_budget.py)
    long_prefill_tokens: int = 32
    kv_cache_bytes: int | None = None  # CPU budget; on CUDA, None means "size from gpu_memory_utilization"
    enable_prefix_caching: bool = True
    attention_backend: str | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    # where the embedded model and GGUF conversions are kept; None: $JUDGE_ENGINE_CACHE or ~/.cache/judge_engine
    cache_dir: str | Path | None = None
    # None: float linear maps; on the CPU (judge_engine/loading/quantization.py), "int8": W8A8 linear maps, or
    # "int8-weights": int8 weights times float32 activations (W8A32); either way activations are float32
    quantization: str | None = None
    dtype_reason: str = field(init=False, default="")  # why the engine computes in `dtype`

    def __post_init__(self) -> None:
        requested = None if self.dtype in (None, "auto") else _normalise_dtype(self.dtype)
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise EngineConfigError(f"device: expected 'cpu' or 'cuda[:N]', got {self.device!r}")
        if self.quantization in ("none", ""):
            self.quantization = None
        if self.quantization is not None:
            _check_quantization(self.quantization, requested, self.device)
            # the int8 products' inputs and outputs, attention, norms and the residual stream are float32
            self.dtype, self.dtype_reason = "float32", "int8 linear maps keep activations in float32"
        else:
            choice = resolve_dtype(requested, self.device)
            self.dtype, self.dtype_reason = choice.dtype, choice.reason
        if self.block_size is None:
            self.block_size = DEFAULT_BLOCK_SIZE["cpu" if self.device == "cpu" else "cuda"]
        _require_positive_int("block_size", self.block_size)
        _require_positive_int("max_num_seqs", self.max_num_seqs)
        _require_positive_int("max_num_batched_tokens", self.max_num_batched_tokens)
        _require_positive_int("long_prefill_tokens", self.long_prefill_tokens)
        if self.kv_cache_bytes is not None:
            _require_positive_int("kv_cache_bytes", self.kv_cache_bytes)
        if self.max_model_len is not None:
            _require_positive_int("max_model_len", self.max_model_len)
        if not isinstance(self.enable_prefix_caching, bool):
            raise EngineConfigError(
                f"enable_prefix_caching: expected a bool, got {self.enable_prefix_caching!r}")
        if self.attention_backend not in (None, "torch", "triton"):
            raise EngineConfigError(
                f"attention_backend: expected None, 'torch' or 'triton', got {self.attention_backend!r}")
        util = self.gpu_memory_utilization
        if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0.0 < util <= 1.0:
            raise EngineConfigError(f"gpu_memory_utilization: expected a number in (0, 1], got {util!r}")

    @property
    def torch_dtype(self):
        import torch

        return {"float32": torch.float32, "bfloat16": torch.bfloat16}[self.dtype]


def _normalise_dtype(dtype) -> str:
    text = str(dtype).removeprefix("torch.")
    aliases = {"float": "float32", "fp32": "float32", "bf16": "bfloat16"}
    text = aliases.get(text, text)
    if text not in SUPPORTED_DTYPES:
        raise EngineConfigError(f"dtype: expected one of {SUPPORTED_DTYPES} or 'auto', got {dtype!r}")
    return text


def _check_quantization(quantization, dtype: str | None, device: str) -> None:
    from judge_engine.loading.quantization import QUANTIZATIONS

    if quantization not in QUANTIZATIONS:
        raise EngineConfigError(f"quantization: expected None or one of {QUANTIZATIONS}, got {quantization!r}")
    if device != "cpu":
        raise EngineConfigError(f"quantization: {quantization!r} runs on the CPU only, got device {device!r}")
    if dtype not in (None, "float32"):
        raise EngineConfigError(f"quantization: {quantization!r} computes activations in float32, got dtype {dtype!r}")


def _require_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise EngineConfigError(f"{name}: expected a positive integer, got {value!r}")
