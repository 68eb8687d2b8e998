"""The uplift report: a candidate model against the baseline on the held-out split, removed tasks excluded.

Per category and overall, for both models: pass rate (mean over tasks of successes/attempts, with a
Wilson interval over the pooled attempts), pass@k and pass^k (mean over tasks of the unbiased
estimators), and candidate minus baseline with a seeded bootstrap 95% interval (tasks resampled, then
attempts within tasks).
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.pass_rates.estimators import pass_at_k, pass_hat_k
from rubrics.delivery.runs.graded_results import ResultsFile
from rubrics.delivery.pass_rates.intervals import Outcomes, bootstrap_difference, wilson

SEED = 20240611
RESAMPLES = 2000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelFigures(_Strict):
    tasks: int = Field(ge=0)
    attempts: int = Field(ge=0)
    pass_rate: float | None
    pass_rate_low: float | None = Field(description="95% Wilson interval over the pooled attempts.")
    pass_rate_high: float | None
    pass_at_k: float | None
    pass_hat_k: float | None


class Difference(_Strict):
    value: float | None
    low: float | None = Field(description="Bootstrap 95% interval, lower end.")
    high: float | None


class UpliftRow(_Strict):
    category: str = Field(description="A category, or 'all'.")
    baseline: ModelFigures
    candidate: ModelFigures
    pass_rate: Difference
    pass_at_k: Difference
    pass_hat_k: Difference


class UpliftReport(_Strict):
    model_config = ConfigDict(extra="forbid", title="UpliftReport")

    version: int = 1
    baseline_file: str
    candidate_file: str
    k: int = Field(ge=1)
    pass_threshold: float
    seed: int
    resamples: int
    heldout_tasks: list[str] = Field(description="Held-out tasks compared (shipped, with attempts on both sides).")
    excluded_removed: list[str] = Field(description="Held-out tasks removed (pass rates, validation, review).")
    excluded_unscored: list[str] = Field(description="Held-out tasks without attempts from one of the models.")
    rows: list[UpliftRow]


def outcomes_by_task(results: ResultsFile, threshold: float) -> dict[str, list[bool]]:
    """Distinct complete attempts (first grade of a regraded one), reference runs left out."""
    seen: dict[str, dict[str, bool]] = defaultdict(dict)
    for a in results.attempts:
        if a.complete and not a.is_reference and a.trajectory_id not in seen[a.task_id]:
            seen[a.task_id][a.trajectory_id] = a.score >= threshold
    return {t: list(v.values()) for t, v in seen.items()}


def build_uplift(baseline: ResultsFile, candidate: ResultsFile, categories: dict[str, str], heldout: list[str],
                 removed: set[str], *, k: int, threshold: float, names: tuple[str, str]) -> UpliftReport:
    base, cand = outcomes_by_task(baseline, threshold), outcomes_by_task(candidate, threshold)
    shipped = [t for t in sorted(heldout) if t not in removed]
    scored = [t for t in shipped if base.get(t) and cand.get(t)]
    k = min([k] + [len(base[t]) for t in scored] + [len(cand[t]) for t in scored]) if scored else k
    groups = sorted({categories[t] for t in scored})
    rows = [_row(c, [t for t in scored if categories[t] == c], base, cand, k) for c in groups]
    rows.append(_row("all", scored, base, cand, k))
    return UpliftReport(baseline_file=names[0], candidate_file=names[1], k=k, pass_threshold=threshold, seed=SEED,
                        resamples=RESAMPLES, heldout_tasks=scored,
                        excluded_removed=[t for t in sorted(heldout) if t in removed],
                        excluded_unscored=[t for t in shipped if t not in scored], rows=rows)


def _row(category: str, tasks: list[str], base: dict[str, list[bool]], cand: dict[str, list[bool]],
         k: int) -> UpliftRow:
    b = [base[t] for t in tasks]
    c = [cand[t] for t in tasks]

    def diff(metric) -> Difference:
        mb, mc = metric(b), metric(c)
        interval = bootstrap_difference(b, c, metric, RESAMPLES, SEED)
        return Difference(value=_r(mc - mb) if mb is not None and mc is not None else None,
                          low=_r(interval[0]) if interval else None, high=_r(interval[1]) if interval else None)

    return UpliftRow(category=category, baseline=_figures(b, k), candidate=_figures(c, k),
                     pass_rate=diff(_rate), pass_at_k=diff(lambda o: _estimator(o, k, pass_at_k)),
                     pass_hat_k=diff(lambda o: _estimator(o, k, pass_hat_k)))


def _figures(outcomes: Outcomes, k: int) -> ModelFigures:
    pooled = [x for task in outcomes for x in task]
    interval = wilson(sum(pooled), len(pooled))
    return ModelFigures(tasks=len(outcomes), attempts=len(pooled), pass_rate=_r(_rate(outcomes)),
                        pass_rate_low=_r(interval[0]) if interval else None,
                        pass_rate_high=_r(interval[1]) if interval else None,
                        pass_at_k=_r(_estimator(outcomes, k, pass_at_k)),
                        pass_hat_k=_r(_estimator(outcomes, k, pass_hat_k)))


def _rate(outcomes: Outcomes) -> float | None:
    return statistics.fmean(sum(t) / len(t) for t in outcomes) if outcomes else None


def _estimator(outcomes: Outcomes, k: int, estimator) -> float | None:
    usable = [t for t in outcomes if len(t) >= k]
    return statistics.fmean(estimator(len(t), sum(t), k) for t in usable) if usable else None


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
