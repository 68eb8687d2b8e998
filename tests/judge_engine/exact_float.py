"""IEEE 754 arithmetic worked out in exact rationals, for the tests that pin a kernel's bits to its definition
(test_float_gemm.py, test_row_attention.py): what a float32 operation gives follows from the standard alone, so a
kernel that matches these on one CPU matches them on every CPU that runs its code. Import with
``from exact_float import ...``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def float32_rounded(value: Fraction) -> Fraction:
    """``value`` rounded to the nearest float32, ties to even (normal and subnormal numbers; no overflow here)."""
    if value == 0:
        return Fraction(0)
    magnitude = abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    while Fraction(2) ** exponent > magnitude:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    spacing = Fraction(2) ** max(exponent - 23, -149)
    return (1 if value > 0 else -1) * round(magnitude / spacing) * spacing


def f32(value) -> np.float32:
    """A float32 (numpy's float32 operations are IEEE 754's, one rounding each, on every CPU)."""
    return np.float32(value)


def fma32(a, b, c) -> np.float32:
    """a * b + c for float32 values, rounded once (a fused multiply-add)."""
    return np.float32(float(float32_rounded(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))))
