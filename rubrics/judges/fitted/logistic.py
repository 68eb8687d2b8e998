"""The logistic function, its inverse, and a logistic-regression fit: what calibrations are made of."""

from __future__ import annotations

import math
from collections.abc import Sequence


def sigmoid(x: float) -> float:
    """1 / (1 + exp(-x)) without overflow for any x."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def logit(p: float, eps: float = 1e-12) -> float:
    p = min(max(p, eps), 1.0 - eps)
    return math.log(p / (1.0 - p))


def fit_logistic(xs: Sequence[float], ys: Sequence[bool], l2: float = 1e-2, steps: int = 50) -> tuple[float, float]:
    """(scale, offset) maximising the log-likelihood of ys under sigmoid(scale * x + offset), by Newton's method.

    A small L2 penalty on the scale keeps the fit finite when the classes separate perfectly (a few labels).
    """
    if not xs or len(xs) != len(ys):
        raise ValueError("fit_logistic needs as many labels as scores, and at least one")
    a, b = 0.0, 0.0
    for _ in range(steps):
        ga, gb, haa, hab, hbb = -l2 * a, 0.0, l2, 0.0, 1e-9
        for x, y in zip(xs, ys):
            p = sigmoid(a * x + b)
            r = float(y) - p
            w = p * (1.0 - p)
            ga += r * x
            gb += r
            haa += w * x * x
            hab += w * x
            hbb += w
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        a, b = a + da, b + db
        if abs(da) < 1e-10 and abs(db) < 1e-10:
            break
    return a, b
