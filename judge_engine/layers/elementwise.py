"""Elementwise functions whose result for an element does not depend on the tensor's size.

torch's CPU kernels compute transcendental functions (exp in SiLU, cos, sin) with SIMD code for whole
vector blocks and with scalar code for the leftover elements at the end of the buffer, and the two round
differently. Which elements are left over depends on how many tokens share the step, so a token's
activations would change with its batch. Padding the flattened input to a multiple of the widest block
sends every element through the SIMD code.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

SIMD_BLOCK = 64  # two AVX-512 vectors of 32 16-bit values, the widest unrolled step of torch's CPU loops


def apply_blockwise(function: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    count = x.numel()
    if x.device.type != "cpu" or count % SIMD_BLOCK == 0:
        return function(x)
    flat = F.pad(x.reshape(-1), (0, SIMD_BLOCK - count % SIMD_BLOCK))
    return function(flat)[:count].view(x.shape)


def silu(x: torch.Tensor) -> torch.Tensor:
    return apply_blockwise(F.silu, x)


def silu_and_mul_(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up``, computed in ``gate``'s own buffer when it is a fresh contiguous tensor (the
    MLP's widest activations: one pass through memory fewer, and no new buffer)."""
    if not gate.is_contiguous():
        gate = gate.contiguous()  # a view of a fused gate/up output: this copy is the fresh buffer
    if gate.device.type == "cpu" and gate.numel() % SIMD_BLOCK:
        return silu(gate).mul_(up)
    return F.silu(gate, inplace=True).mul_(up)
