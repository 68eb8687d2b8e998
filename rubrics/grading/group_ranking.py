"""The maths of grading attempts as a group: which pairs to compare, a Bradley-Terry ranking from the judge's
side-by-side preferences, and per-attempt probabilities that stay on the rubric's scale.

- Pairs: each attempt is compared with `per_attempt` others, on a circle (attempt i with i+1, i+2, ...), so the
  work grows as n * per_attempt, not n squared; with per_attempt >= n - 1 every pair is compared.
- A pair judged in both orders gives the log-odds that attempt i is the better one with the position bias
  cancelled: d = (logit P(A | i first) - logit P(A | j first)) / 2.
- Strengths: the Bradley-Terry model P(i better than j) = sigmoid(s_i - s_j), fitted to the pairs' preferences
  (soft targets sigmoid(d)) with each attempt's own pointwise logit as its prior mean (a Gaussian prior of unit
  variance): the absolute verdict is the starting point, and the comparisons move an attempt up or down from it.
- Probabilities: the group's pointwise probabilities, sorted, handed out in the order of the strengths. The
  absolute judge decides how many attempts meet the item; the side-by-side comparisons decide which. So a group
  whose attempts were all met (or all unmet) keeps its verdicts, and the group's expected number of met attempts
  does not change.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rubrics.judges.fitted.logistic import logit, sigmoid

PRIOR_VARIANCE = 1.0      # of a strength around its attempt's pointwise logit
PROBABILITY_FLOOR = 1e-4  # pointwise probabilities of exactly 0 or 1 (a parsed answer) as finite logits
FIT_STEPS = 200


@dataclass(frozen=True)
class Preference:
    """Attempt `better` over attempt `worse` by `log_odds` (negative: the other way round)."""
    better: int
    worse: int
    log_odds: float


def comparison_pairs(n: int, per_attempt: int) -> list[tuple[int, int]]:
    """Unordered pairs (i < j) of n attempts, each attempt in at least min(per_attempt, n - 1) of them: the circle
    design, deterministic in n and per_attempt alone."""
    if n < 2 or per_attempt < 1:
        return []
    reach = min(n - 1, per_attempt)
    pairs = set()
    for offset in range(1, (reach + 1) // 2 + 1):
        for i in range(n):
            j = (i + offset) % n
            pairs.add((min(i, j), max(i, j)))
    return sorted(pairs)


def debiased_log_odds(first_order: float, second_order: float) -> float:
    """The log-odds that the attempt shown first in `first_order` is the better one, from the probabilities of
    answer A in both orders (P(A) with it first, P(A) with it second)."""
    return (_logit(first_order) - _logit(second_order)) / 2


def strengths(priors: Sequence[float], preferences: Sequence[Preference]) -> list[float]:
    """Bradley-Terry strengths on the logit scale, the maximum a posteriori under the priors (gradient ascent with a
    step that the curvature bound makes safe: the objective is concave, and the iteration count is fixed)."""
    s = list(priors)
    degree = [0] * len(s)
    for p in preferences:
        degree[p.better] += 1
        degree[p.worse] += 1
    step = 1.0 / (max(degree, default=0) / 2 + 1.0 / PRIOR_VARIANCE)
    for _ in range(FIT_STEPS):
        gradient = [(prior - value) / PRIOR_VARIANCE for prior, value in zip(priors, s)]
        for p in preferences:
            push = sigmoid(p.log_odds) - sigmoid(s[p.better] - s[p.worse])
            gradient[p.better] += push
            gradient[p.worse] -= push
        s = [value + step * g for value, g in zip(s, gradient)]
    return s


def reassigned(probabilities: Sequence[float], strength: Sequence[float]) -> list[float]:
    """The probabilities handed out again: the highest to the strongest attempt, and so on (ties keep their
    order)."""
    order = sorted(range(len(strength)), key=lambda i: (-strength[i], i))
    ranked = sorted(probabilities, reverse=True)
    out = [0.0] * len(probabilities)
    for place, attempt in enumerate(order):
        out[attempt] = ranked[place]
    return out


def ranks(strength: Sequence[float]) -> list[int]:
    """1 for the strongest attempt."""
    order = sorted(range(len(strength)), key=lambda i: (-strength[i], i))
    out = [0] * len(strength)
    for place, attempt in enumerate(order, start=1):
        out[attempt] = place
    return out


def pointwise_logit(probability: float) -> float:
    return _logit(probability)


def _logit(probability: float) -> float:
    clipped = min(max(probability, PROBABILITY_FLOOR), 1 - PROBABILITY_FLOOR)
    return logit(clipped) if math.isfinite(clipped) else 0.0
