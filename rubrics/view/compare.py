"""Two runs of the same trajectories side by side: per trajectory the score difference and the items that flipped,
and a summary with the mean difference and its bootstrap interval.

The interval is the uplift report's computation (rubrics.delivery.pass_rates.intervals.bootstrap_difference, with the
report's seed and resample count), paired by trajectory: each trajectory is a "task" with one attempt, its score.
"""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from rubrics.delivery.pass_rates.intervals import bootstrap_difference
from rubrics.delivery.report.uplift import RESAMPLES, SEED
from rubrics.result import Result

# Scores are ratios of small integers: a difference below this is float noise, not a change.
SAME = 1e-9


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Flip(_Frozen):
    item_id: str
    before: str   # met | unmet | error, or "absent" when the other run's rubric has no such item
    after: str


class PairedResult(_Frozen):
    key: str
    trajectory_id: str
    index_a: int          # the row in run A (the page's run)
    index_b: int          # the row in run B (--compare)
    score_a: float
    score_b: float
    difference: float     # B minus A
    complete: bool        # both results complete: only those enter the summary
    flipped: list[Flip]


class CompareSummary(_Frozen):
    paired: int
    compared: int                  # paired, both complete
    improved: int
    regressed: int
    unchanged: int
    mean_difference: float | None
    low: float | None              # bootstrap 95% interval of the mean difference
    high: float | None
    seed: int
    resamples: int


class Comparison(_Frozen):
    file_a: str
    file_b: str
    pairs: list[PairedResult]
    only_in_a: list[str]
    only_in_b: list[str]
    summary: CompareSummary


def result_keys(results: Sequence[Result], other: Sequence[Result]) -> tuple[list[str], list[str]]:
    """Trajectory ids pair the runs; when a file grades one trajectory more than once (several rubrics), the
    rubric id joins the key in both files so that each grade finds its counterpart."""
    def repeated(rs: Sequence[Result]) -> bool:
        return any(n > 1 for n in Counter(r.trajectory_id for r in rs).values())

    both = repeated(results) or repeated(other)
    key = (lambda r: f"{r.trajectory_id} · {r.rubric_id}") if both else (lambda r: r.trajectory_id)
    return [key(r) for r in results], [key(r) for r in other]


def compare_runs(a: Sequence[Result], b: Sequence[Result], file_a: str, file_b: str) -> Comparison:
    keys_a, keys_b = result_keys(a, b)
    where_b: dict[str, int] = {}
    for index, key in enumerate(keys_b):
        where_b.setdefault(key, index)
    seen: set[str] = set()
    pairs = []
    for index, key in enumerate(keys_a):
        if key in seen or key not in where_b:
            continue
        seen.add(key)
        ra, rb = a[index], b[where_b[key]]
        pairs.append(PairedResult(key=key, trajectory_id=ra.trajectory_id, index_a=index, index_b=where_b[key],
                                  score_a=ra.score, score_b=rb.score, difference=rb.score - ra.score,
                                  complete=ra.complete and rb.complete, flipped=flips(ra, rb)))
    return Comparison(file_a=file_a, file_b=file_b, pairs=pairs,
                      only_in_a=sorted({k for k in keys_a if k not in where_b}),
                      only_in_b=sorted(set(keys_b) - set(keys_a)), summary=summarise(pairs))


def flips(a: Result, b: Result) -> list[Flip]:
    before = {item.id: item.status for item in a.items}
    after = {item.id: item.status for item in b.items}
    order = list(before) + [i for i in after if i not in before]
    return [Flip(item_id=i, before=before.get(i, "absent"), after=after.get(i, "absent"))
            for i in order if before.get(i) != after.get(i)]


def summarise(pairs: Sequence[PairedResult]) -> CompareSummary:
    complete = [p for p in pairs if p.complete]
    base = [[p.score_a] for p in complete]
    cand = [[p.score_b] for p in complete]
    interval = bootstrap_difference(base, cand, _mean_score, RESAMPLES, SEED)
    return CompareSummary(
        paired=len(pairs), compared=len(complete),
        improved=sum(p.difference > SAME for p in complete), regressed=sum(p.difference < -SAME for p in complete),
        unchanged=sum(abs(p.difference) <= SAME for p in complete),
        mean_difference=statistics.fmean(p.difference for p in complete) if complete else None,
        low=interval[0] if interval else None, high=interval[1] if interval else None,
        seed=SEED, resamples=RESAMPLES)


def _mean_score(runs: Sequence[Sequence[float]]) -> float | None:
    return statistics.fmean(run[0] for run in runs) if runs else None
