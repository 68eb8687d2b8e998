"""Rotary position embedding (the rotate-half layout of HF checkpoints), with linear, llama3 and long-rope
scaling."""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

import torch

from judge_engine.layers import c_kernels
from judge_engine.layers.elementwise import apply_blockwise


def inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> torch.Tensor:
    """float32 [head_dim / 2], computed the way transformers does so that positions rotate identically."""
    # computed on the CPU whatever the default device, so every device rotates by the same angles
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").to(torch.float32) / head_dim
    inv_freq = 1.0 / (theta**exponents)
    if scaling is None:
        return inv_freq
    if scaling["rope_type"] == "longrope":
        # the per-dimension factors the config chose (models/phi3.py: short or long, for the whole context)
        return 1.0 / (torch.tensor(scaling["factors"], dtype=torch.float32) * theta**exponents)
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return inv_freq / factor
    return _llama3(inv_freq, factor, scaling)


def _llama3(inv_freq: torch.Tensor, factor: float, scaling: dict[str, Any]) -> torch.Tensor:
    """Llama 3.1 scaling: long wavelengths slowed by ``factor``, short ones kept, a smooth blend in between."""
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    old_context = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context / low_freq_factor
    high_freq_wavelen = old_context / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rotary_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype, scaling: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin ``[T, 1, head_dim]`` for the flat batch positions, computed in float32 (and multiplied by
    ``scaling``, long-rope's attention factor) then cast."""
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    angles = torch.cat((freqs, freqs), dim=-1)
    cos, sin = apply_blockwise(torch.cos, angles), apply_blockwise(torch.sin, angles)
    if scaling != 1.0:
        cos, sin = cos * scaling, sin * scaling
    return cos.to(dtype).unsqueeze(1), sin.to(dtype).unsqueeze(1)


def rotary_scaling(scaling: dict[str, Any] | None) -> float:
    """The factor cos and sin are multiplied by: long-rope's attention factor, else 1."""
    if scaling is None or scaling["rope_type"] != "longrope":
        return 1.0
    return float(scaling["attention_factor"])


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [T, H, head_dim]``; the two halves of the head dimension form the complex pairs.

    ``x * cos + rotate_half(x) * sin`` as transformers writes it, without building rotate_half(x): the
    first half gets ``x1 * cos - x2 * sin`` and the second ``x2 * cos + x1 * sin``, which are the same
    IEEE results (negation is exact) with fewer passes through memory. In float32 on a CPU with AVX2, the engine's
    kernel (``kernels/rotary.c``) computes the same operations in one pass: the same bits.
    """
    by_kernel = _rotary_by_kernel(x, cos, sin)
    return by_kernel if by_kernel is not None else rotary_in_torch(x, cos, sin)


def rotary_in_torch(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """apply_rotary in torch's operations (any dtype, device and layout)."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    out = x * cos
    out[..., :half].sub_(second * sin[..., :half])
    out[..., half:].add_(first * sin[..., half:])
    return out


@functools.lru_cache(maxsize=1)
def rotary_kernel() -> c_kernels.Kernel:
    """The rotary kernel of this process, built (once per machine) and loaded on the first call."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return c_kernels.load("rotary.c", "rotary", [pointer, i64, i64, i64, i64, i64, pointer, i64, pointer, i64, pointer])


def _rotary_by_kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | None:
    """apply_rotary's result through the kernel: for float32 ``x [T, H, D]`` on the CPU with ``cos`` and ``sin``
    ``[T, 1, D]``, each with its last dimension contiguous; None elsewhere."""
    if not (x.device.type == "cpu" and x.dtype == cos.dtype == sin.dtype == torch.float32 and x.dim() == 3
            and x.shape[-1] % 2 == 0 and cos.shape == sin.shape == (x.shape[0], 1, x.shape[2])
            and x.stride(2) == cos.stride(2) == sin.stride(2) == 1 and rotary_kernel().function is not None):
        return None
    tokens, heads, dim = x.shape
    out = torch.empty((tokens, heads, dim), dtype=torch.float32)
    if out.numel():
        rotary_kernel().function(x.data_ptr(), x.stride(0), x.stride(1), tokens, heads, dim, cos.data_ptr(),
                                 cos.stride(0), sin.data_ptr(), sin.stride(0), out.data_ptr())
    return out
