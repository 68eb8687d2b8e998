"""The score as a random variable: its expectation when judge items are met with their probability, and its
range over the ways the uncertain items could fall.

A judge's verdict is a probability; the hard score rounds each one to met/unmet at the item's threshold, so a
trainer reading only the score cannot tell a confident 1.0 from a coin that landed well. Items are taken as
independent. Each is an Outcome: its verdict (met or not) and the probability that it is met (1 or 0 for code
checks and for judge verdicts that carry no probability).

Expectation: gates and criteria enter the score separately (0 unless every gate is met, else a function of the
earned points), so E[score] = P(every gate met) * E[min(1, max(0, earned) / total)]; the second factor is a sum
over the distribution of earned points, built item by item (a dynamic program over points with at most one
entry per reachable sum, so it is exact, not sampled, and never worse than enumerating the 2^n outcomes).

Range: the score is monotone in each item (meeting a gate or a positive criterion never lowers it, meeting a
penalty never raises it), so over every way the free (uncertain) items could fall, with the others at their
verdict, the lowest score has every free gate and positive criterion unmet and every free penalty met, and the
highest the opposite. No enumeration is needed.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from rubrics.rubric.spec import Band   # an item's uncertain band, resolved by the compiler


@dataclass(frozen=True)
class Outcome:
    """One item as the maths sees it."""
    kind: str             # "gate" | "criterion"
    points: int           # criteria: the item's points (negative for a penalty); gates: ignored
    met: bool             # the verdict the hard score uses
    probability: float    # P(met) for the expectation
    free: bool = False    # uncertain: the range lets it fall either way

    @property
    def raises(self) -> bool:
        """Whether meeting this item can only raise the score (a gate or a positive criterion)."""
        return self.kind == "gate" or self.points > 0


def in_band(probability: float | None, band: Band) -> bool:
    """Whether a judge probability is too close to a coin to trust its verdict (the band is inclusive)."""
    return probability is not None and band[0] <= probability <= band[1]


def hard_score(gates_met: bool, earned: int, total: int) -> float:
    """The rubric's score: 0 when a gate is unmet (or nothing can be earned), else min(1, max(0, earned) / total)."""
    if not gates_met or total <= 0:
        return 0.0
    return min(1.0, max(0, earned) / total)


def score_of(outcomes: Iterable[Outcome], met: Sequence[bool], total: int) -> float:
    """The hard score when the items fall as `met` says (one bool per outcome, in order)."""
    pairs = list(zip(outcomes, met, strict=True))
    gates_met = all(m for o, m in pairs if o.kind == "gate")
    earned = sum(o.points for o, m in pairs if o.kind == "criterion" and m)
    return hard_score(gates_met, earned, total)


def earned_distribution(criteria: Iterable[Outcome]) -> dict[int, float]:
    """P(earned = e) for every reachable e, items independent (certain items just shift every sum)."""
    distribution: dict[int, float] = {0: 1.0}
    for item in criteria:
        p = item.probability
        step: dict[int, float] = defaultdict(float)
        for earned, weight in distribution.items():
            if p > 0.0:
                step[earned + item.points] += weight * p
            if p < 1.0:
                step[earned] += weight * (1.0 - p)
        distribution = dict(step)
    return distribution


def expected_score(outcomes: Sequence[Outcome], total: int) -> float:
    """E[score] with each item met with its probability, items independent."""
    if total <= 0:
        return 0.0
    gates = math.prod(o.probability for o in outcomes if o.kind == "gate")
    if gates == 0.0:
        return 0.0
    criteria = [o for o in outcomes if o.kind == "criterion"]
    spread = math.fsum(w * hard_score(True, e, total) for e, w in earned_distribution(criteria).items())
    return min(1.0, max(0.0, gates * spread))   # rounding must not leave [0, 1]


def score_range(outcomes: Sequence[Outcome], total: int) -> tuple[float, float]:
    """(lowest, highest) score over every way the free items could fall, the others at their verdict."""
    low = [o.met if not o.free else not o.raises for o in outcomes]
    high = [o.met if not o.free else o.raises for o in outcomes]
    return score_of(outcomes, low, total), score_of(outcomes, high, total)
