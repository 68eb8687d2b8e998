"""Uncertainty of pass rates: Wilson score intervals for one rate, a seeded two-level bootstrap for differences."""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95% Wilson score interval of successes/n; it stays inside [0, 1] and is honest at 0/n and n/n."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


Outcomes = Sequence[Sequence[bool]]          # per task, the successes of its attempts


def bootstrap_difference(baseline: Outcomes, candidate: Outcomes, metric: Callable[[Outcomes], float | None],
                         resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile 95% interval of metric(candidate) - metric(baseline).

    Tasks are resampled with replacement (the same draw for both models: the comparison is paired by
    task), then each model's attempts within each drawn task.
    """
    if not baseline or len(baseline) != len(candidate):
        return None
    rng = random.Random(seed)
    tasks = range(len(baseline))
    diffs = []
    for _ in range(resamples):
        drawn = [rng.choice(tasks) for _ in tasks]
        b = [_resample(rng, baseline[i]) for i in drawn]
        c = [_resample(rng, candidate[i]) for i in drawn]
        mb, mc = metric(b), metric(c)
        if mb is not None and mc is not None:
            diffs.append(mc - mb)
    if not diffs:
        return None
    diffs.sort()
    return diffs[int(0.025 * (len(diffs) - 1))], diffs[int(math.ceil(0.975 * (len(diffs) - 1)))]


def _resample(rng: random.Random, attempts: Sequence[bool]) -> list[bool]:
    return [rng.choice(attempts) for _ in attempts]
