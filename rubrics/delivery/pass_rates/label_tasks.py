"""Per-task pass rates: how often a current model solves each task, and what to do with it.

From the seed notes: run a current model n times on each task; 0% -> inspect (too hard, or broken),
100% -> drop (already solved, nothing to learn), anything between -> keep (learning signal).
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from rubrics.delivery.pass_rates.estimators import pass_at_k, pass_hat_k
from rubrics.delivery.pass_rates.records import (
    FLAKY_CODES,
    Flag,
    Provenance,
    Label,
    LabelCounts,
    PassRates,
    TaskPassRate,
)
from rubrics.delivery.runs.graded_results import GradedAttempt, ResultsFile

DIGITS = 6   # rounding of reported statistics, so that pass_rates.json stays short and stable


def label_for(pass_rate: float | None) -> Label:
    if pass_rate is None or pass_rate == 0.0:
        return "inspect"
    if pass_rate == 1.0:
        return "drop"
    return "keep"


def label_tasks(
    results: ResultsFile,
    categories: dict[str, str | None],
    *,
    attempts_requested: int = 16,
    k: int | None = None,
    pass_threshold: float = 1.0,
    results_name: str = "results.jsonl",
) -> PassRates:
    """One TaskPassRate per task in `categories` (task id -> category), in task id order.

    k defaults to attempts_requested // 2 (at least 1): pass@n from n attempts only says "solved once".
    """
    if attempts_requested < 1:
        raise ValueError(f"--attempts must be >= 1, got {attempts_requested}")
    k = k if k is not None else max(1, attempts_requested // 2)
    if not 1 <= k <= attempts_requested:
        raise ValueError(f"--k must be in [1, --attempts], got {k}")
    by_task: dict[str, list[GradedAttempt]] = defaultdict(list)
    for attempt in results.attempts:
        by_task[attempt.task_id].append(attempt)
    tasks = [
        _task(task_id, category, by_task.get(task_id, []), attempts_requested, k, pass_threshold)
        for task_id, category in sorted(categories.items())
    ]
    return PassRates(
        results_file=results_name,
        attempts_requested=attempts_requested,
        k=k,
        pass_threshold=pass_threshold,
        summary=_counts(tasks),
        tasks=tasks,
        unknown_tasks=sorted(set(by_task) - set(categories)),
        problems=results.problems,
        provenance=provenance(results.attempts),
    )


def provenance(attempts: list[GradedAttempt]) -> Provenance:
    digests = {str((a.grader or {}).get("grade_sh_sha256")) for a in attempts if a.grader}
    return Provenance(
        graders=sorted({a.grader_label() for a in attempts}),
        judges=sorted({a.judge for a in attempts if a.judge}),
        rubrics=sorted({a.rubric_id for a in attempts if a.rubric_id}),
        grade_scripts=len(digests),
    )


def _task(
    task_id: str, category: str | None, graded: list[GradedAttempt], requested: int, k: int, threshold: float
) -> TaskPassRate:
    flags: list[Flag] = []
    runs = [g for g in graded if not g.is_reference]
    incomplete = [g for g in runs if not g.complete]
    if incomplete:
        flags.append(Flag(code="incomplete-results", message=f"{len(incomplete)} incomplete result(s) left out"))
    scores_by_attempt = _distinct_attempts([g for g in runs if g.complete], flags)
    reference = _reference_status([g for g in graded if g.is_reference], threshold, flags)
    scores = [grades[0] for grades in scores_by_attempt.values()]   # a regraded attempt counts once, first grade
    n = len(scores)
    c = sum(1 for s in scores if s >= threshold)
    if n == 0:
        flags.append(Flag(code="no-results", message="no graded attempts"))
    if n < requested:
        flags.append(Flag(code="too-few-attempts", message=f"{n} of {requested} attempts"))
    rate = c / n if n else None
    return TaskPassRate(
        task_id=task_id,
        category=category,
        attempts=n,
        successes=c,
        pass_rate=_round(rate),
        score_mean=_round(statistics.fmean(scores)) if n else None,
        score_std=_round(statistics.pstdev(scores)) if n else None,
        score_min=min(scores) if n else None,
        score_max=max(scores) if n else None,
        pass_at_1=_round(pass_at_k(n, c, 1)) if n else None,
        pass_at_k=_round(pass_at_k(n, c, k)) if n >= k else None,
        pass_hat_k=_round(pass_hat_k(n, c, k)) if n >= k else None,
        reference=reference,
        label=label_for(rate),
        flaky=any(f.code in FLAKY_CODES for f in flags),
        flags=sorted(flags, key=lambda f: f.code),
    )


def _distinct_attempts(runs: list[GradedAttempt], flags: list[Flag]) -> dict[str, list[float]]:
    grades: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        grades[run.trajectory_id].append(run.score)
    disagreeing = sorted(t for t, s in grades.items() if len(set(s)) > 1)
    if disagreeing:
        shown = ", ".join(f"{t} ({' vs '.join(_fmt(s) for s in grades[t])})" for t in disagreeing[:3])
        more = f" and {len(disagreeing) - 3} more" if len(disagreeing) > 3 else ""
        flags.append(Flag(code="flaky-regrade", message=f"same attempt graded differently: {shown}{more}"))
    return grades


def _reference_status(references: list[GradedAttempt], threshold: float, flags: list[Flag]) -> str:
    if not references:
        return "absent"
    failed = [r for r in references if r.score < threshold]
    if failed:
        scores = ", ".join(f"{r.trajectory_id} scored {_fmt(r.score)}" for r in failed)
        flags.append(Flag(code="reference-fails", message=f"reference solution fails: {scores}"))
        return "failed"
    return "passed"


def _counts(tasks: list[TaskPassRate]) -> LabelCounts:
    return LabelCounts(
        keep=sum(t.label == "keep" for t in tasks),
        drop=sum(t.label == "drop" for t in tasks),
        inspect=sum(t.label == "inspect" for t in tasks),
        flaky=sum(t.flaky for t in tasks),
        too_few_attempts=sum(any(f.code == "too-few-attempts" for f in t.flags) for t in tasks),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


def _fmt(score: float) -> str:
    return f"{score:g}"
