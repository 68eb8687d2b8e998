"""Soft-capping of attention scores inside the kernels (Gemma 2's attn_logit_softcapping)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def soft_cap_log2(scores, softcap):
    """``softcap * tanh(s / softcap)`` for scores already scaled to the log2 domain (``s * log2(e)``): the cap
    is scaled alike, and tanh is ``2 * sigmoid(2x) - 1`` (Triton's core language has no tanh that every backend
    and the interpreter share); its rounding near 0 is a few 1e-8, far inside the kernels' float32 tolerance."""
    cap = softcap * 1.4426950408889634  # log2(e)
    return cap * (2.0 * tl.sigmoid(2.0 * scores / cap) - 1.0)
