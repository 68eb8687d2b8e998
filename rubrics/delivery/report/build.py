"""Assemble the report's numbers from task.yaml files, pass_rates.json, split.json and the folder checks."""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from rubrics.delivery.pass_rates.records import PassRates, TaskPassRate
from rubrics.delivery.pass_rates.intervals import wilson
from rubrics.delivery.tasks.layout import DeliveryFolder
from rubrics.rubric.problems import Problem
from rubrics.delivery.report.records import (
    CategoryBaseline,
    CategoryMix,
    DeliveryReport,
    Decision,
    PassRateSettings,
    RemovedTask,
    SplitCounts,
    SplitSummary,
    TaskRow,
)
from rubrics.delivery.tasks.removal_reasons import ManualReason
from rubrics.delivery.split.heldout import SplitPlan
from rubrics.delivery.tasks.task import TaskSpec
from rubrics.delivery.runs.validation_records import ValidationReport

CHART_FILE = "pass-rates.svg"


@dataclass
class ReportInputs:
    delivery: DeliveryFolder
    specs: dict[str, TaskSpec]
    pass_rates: PassRates | None   # pass_rates.json
    plan: SplitPlan | None
    check_errors: dict[str, list[Problem]]   # task id -> folder-check errors
    validation: ValidationReport | None = None
    manual: dict[str, list[ManualReason]] | None = None   # task id -> reasons from its removal.yaml


def build_report(inputs: ReportInputs) -> DeliveryReport:
    specs = inputs.specs
    rated = {t.task_id: t for t in inputs.pass_rates.tasks} if inputs.pass_rates else {}
    removed = removed_tasks(inputs)
    removed_ids = {r.task_id for r in removed}
    to_inspect = _to_inspect(rated, removed_ids)
    inspect_ids = {r.task_id for r in to_inspect}
    if inputs.plan is not None:
        heldout = set(inputs.plan.heldout)
    else:
        heldout = {ref.id for ref in inputs.delivery.heldout}
    flags = _extra_flags(inputs)
    rows = [_row(task_id, specs[task_id], rated.get(task_id), "heldout" if task_id in heldout else "tasks",
                 flags.get(task_id, []), _decision(task_id, removed_ids, inspect_ids)) for task_id in sorted(specs)]
    settings = None
    if inputs.pass_rates is not None:
        c = inputs.pass_rates
        settings = PassRateSettings(results_file=c.results_file, attempts_requested=c.attempts_requested,
                                    k=c.k, pass_threshold=c.pass_threshold)
    return DeliveryReport(
        total_tasks=len(specs),
        layout=inputs.delivery,
        category_mix=_mix(specs),
        baseline=_baseline(specs, rated, removed_ids) if rated else [],
        calibration=settings,
        tasks=rows,
        removed=removed,
        to_inspect=to_inspect,
        split=_split_summary(inputs.plan, specs, removed_ids) if inputs.plan else None,
        chart=CHART_FILE if rated else None,
        provenance=inputs.pass_rates.provenance if inputs.pass_rates else None,
        validated=inputs.validation is not None,
    )


def _decision(task_id: str, removed: set[str], inspect: set[str]) -> Decision:
    return "removed" if task_id in removed else "inspect" if task_id in inspect else "keep"


def _extra_flags(inputs: ReportInputs) -> dict[str, list[str]]:
    flags: dict[str, list[str]] = {}
    for task_id, errors in inputs.check_errors.items():
        if errors:
            flags.setdefault(task_id, []).append("check")
    for task in inputs.validation.tasks if inputs.validation else []:
        if task.verdict == "invalid":
            flags.setdefault(task.task_id, []).append("invalid")
    for task_id, reasons in (inputs.manual or {}).items():
        if reasons:
            flags.setdefault(task_id, []).append("manual")
    return flags


def _row(task_id: str, spec: TaskSpec, cal: TaskPassRate | None, side: str, extra_flags: list[str],
         decision: Decision) -> TaskRow:
    flags = ([f.code for f in cal.flags] if cal else []) + extra_flags
    interval = wilson(cal.successes, cal.attempts) if cal else None
    return TaskRow(
        task_id=task_id, category=spec.metadata.category, difficulty=spec.metadata.difficulty, side=side,
        attempts=cal.attempts if cal else None, successes=cal.successes if cal else None,
        pass_rate=cal.pass_rate if cal else None,
        pass_rate_low=round(interval[0], 4) if interval else None,
        pass_rate_high=round(interval[1], 4) if interval else None,
        pass_at_1=cal.pass_at_1 if cal else None,
        pass_at_k=cal.pass_at_k if cal else None, pass_hat_k=cal.pass_hat_k if cal else None,
        label=cal.label if cal else None, decision=decision, flags=flags,
    )


def _mix(specs: dict[str, TaskSpec]) -> list[CategoryMix]:
    by_category: dict[str, Counter] = {}
    for spec in specs.values():
        by_category.setdefault(spec.metadata.category, Counter())[spec.metadata.difficulty] += 1
    total = len(specs)
    return [
        CategoryMix(category=c, tasks=sum(d.values()), share=round(sum(d.values()) / total, 4),
                    easy=d["easy"], medium=d["medium"], hard=d["hard"])
        for c, d in sorted(by_category.items())
    ]


def _baseline(specs: dict[str, TaskSpec], rated: dict[str, TaskPassRate],
              removed: set[str]) -> list[CategoryBaseline]:
    categories = sorted({s.metadata.category for s in specs.values()})
    rows = [_baseline_row(c, [t for t in sorted(specs) if specs[t].metadata.category == c], rated, removed)
            for c in categories]
    rows.append(_baseline_row("all", sorted(specs), rated, removed))
    return rows


def _baseline_row(category: str, task_ids: list[str], rated: dict[str, TaskPassRate],
                  removed: set[str]) -> CategoryBaseline:
    cals = [rated[t] for t in task_ids if t in rated]
    scored = [c for c in cals if c.pass_at_1 is not None]
    shipped = [c for c in scored if c.task_id not in removed]
    return CategoryBaseline(
        category=category,
        calibrated=len(scored),
        pass_at_1=_mean([c.pass_at_1 for c in scored]),
        pass_at_1_shipped=_mean([c.pass_at_1 for c in shipped]),
        keep=sum(c.label == "keep" for c in cals),
        drop=sum(c.label == "drop" for c in cals),
        inspect=sum(c.label == "inspect" for c in cals),
    )


def removed_tasks(inputs: ReportInputs) -> list[RemovedTask]:
    """Every task not to ship, with each reason: its pass rate, folder check, validation, a person."""
    rated = {t.task_id: t for t in inputs.pass_rates.tasks} if inputs.pass_rates else {}
    check_errors = inputs.check_errors
    invalid = {t.task_id: t.reasons for t in inputs.validation.tasks if t.verdict == "invalid"} \
        if inputs.validation else {}
    manual = inputs.manual or {}
    removed = []
    for task_id in sorted(inputs.specs):
        reasons = []
        cal = rated.get(task_id)
        if cal is not None and cal.label == "drop":
            reasons.append(f"already solved: {cal.successes}/{cal.attempts} attempts pass")
        if cal is not None:
            reasons += [f"flaky: {f.message}" for f in cal.flags if f.code in ("flaky-regrade", "reference-fails")]
        errors = check_errors.get(task_id, [])
        if errors:
            first = errors[0]
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            reasons.append(f"fails tasks check: {first.format_at_path()}{more}")
        reasons += [f"fails validation: {reason}" for reason in invalid.get(task_id, [])]
        reasons += [f"removed by review: {reason.format()}" for reason in manual.get(task_id, [])]
        if reasons:
            removed.append(RemovedTask(task_id=task_id, reasons=reasons))
    return removed


def _to_inspect(rated: dict[str, TaskPassRate], removed: set[str]) -> list[RemovedTask]:
    found = []
    for task_id, cal in sorted(rated.items()):
        if cal.label != "inspect" or task_id in removed:
            continue
        reason = "no graded attempts" if cal.attempts == 0 else f"never solved: 0/{cal.attempts} attempts pass"
        found.append(RemovedTask(task_id=task_id, reasons=[reason]))
    return found


HELDOUT_POLICY = ("removed tasks are excluded from both sides: the split was drawn over all tasks, and a removed "
                  "task counts neither for training nor for held-out evaluation")


def _split_summary(plan: SplitPlan, specs: dict[str, TaskSpec], removed: set[str]) -> SplitSummary:
    heldout = set(plan.heldout)
    by_category: dict[str, SplitCounts] = {}
    for category in sorted({s.metadata.category for s in specs.values()}):
        ids = [t for t, s in specs.items() if s.metadata.category == category]
        by_category[category] = SplitCounts(
            all_tasks=len(ids),
            training_shipped=sum(t not in heldout and t not in removed for t in ids),
            heldout_shipped=sum(t in heldout and t not in removed for t in ids),
            removed=sum(t in removed for t in ids))
    return SplitSummary(
        seed=plan.seed, heldout_fraction=plan.heldout_fraction, similarity_threshold=plan.similarity_threshold,
        policy=HELDOUT_POLICY,
        training_shipped=sum(t not in removed for t in plan.tasks),
        heldout_shipped=sum(t not in removed for t in plan.heldout),
        removed_training=sorted(t for t in plan.tasks if t in removed),
        removed_heldout=sorted(t for t in plan.heldout if t in removed),
        groups=len(plan.groups), multi_task_groups=sum(len(g.tasks) > 1 for g in plan.groups),
        near_duplicates=plan.near_duplicates, by_category=by_category,
    )


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 6) if values else None
