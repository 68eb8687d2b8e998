"""report.md: what a lab reads first about a delivery, rendered from the DeliveryReport numbers."""
from __future__ import annotations

from rubrics.delivery.report.records import DeliveryReport, RemovedTask


def render_markdown(report: DeliveryReport) -> str:
    parts = [
        "# Delivery report\n",
        f"{report.total_tasks} tasks in {len(report.category_mix)} categories, {len(report.removed)} removed"
        + (f"; the split ships {report.split.training_shipped} for training and {report.split.heldout_shipped} "
           f"held out." if report.split else "."),
        f"Folders now: {len(report.layout.tasks)} under tasks/, {len(report.layout.heldout)} under heldout/.",
        "",
        _provenance(report),
        _mix(report),
        _baseline(report),
        _labels(report),
        _listing("Removed tasks", report.removed, "No task removed."),
        _listing("Tasks to inspect", report.to_inspect, "No task left unsolved."),
        _split(report),
    ]
    return "\n".join(p for p in parts if p is not None).rstrip() + "\n"


def _provenance(report: DeliveryReport) -> str | None:
    p = report.provenance
    if p is None:
        return None
    lines = ["## Provenance\n",
             "- grader: " + ("; ".join(p.graders) or "-")
             + (f" ({p.grade_scripts} distinct grade.sh)" if p.grade_scripts else ""),
             "- judge model: " + (", ".join(p.judges) or "none (no judge-graded item in the results)"),
             "- rubric: " + (", ".join(p.rubrics) or "none (test-graded results carry no rubric)"),
             "- validation: " + ("validation.json read (rubric tasks validate)" if report.validated
                                 else "not run: no validation.json"), ""]
    return "\n".join(lines)


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{100 * low:.0f}-{100 * high:.0f}%"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _mix(report: DeliveryReport) -> str:
    rows = [[m.category, str(m.tasks), _pct(m.share), str(m.easy), str(m.medium), str(m.hard)] for m in report.category_mix]
    return "## Category mix\n\n" + _table(["category", "tasks", "share", "easy", "medium", "hard"], rows)


def _baseline(report: DeliveryReport) -> str:
    if report.calibration is None:
        return "## Baseline pass@1\n\nNo pass rates yet: run `rubric pass-rates` first.\n"
    c = report.calibration
    intro = (f"From `{c.results_file}`: {c.attempts_requested} attempts asked per task, an attempt passes at "
             f"score >= {c.pass_threshold:g}, k = {c.k}. pass@1 is the mean over calibrated tasks; "
             f"'shipped' leaves out removed tasks.\n\n")
    rows = [[b.category, str(b.calibrated), _pct(b.pass_at_1), _pct(b.pass_at_1_shipped),
             str(b.keep), str(b.drop), str(b.inspect)] for b in report.baseline]
    chart = ""
    if report.chart:
        chart = (f"\n![Pass rate per task, by category]({report.chart})\n\nBars are stacked by final decision "
                 "(keep, inspect, removed); '!n' counts the flagged tasks in a bar.\n")
    header = ["category", "tasks calibrated", "pass@1, all", "pass@1, shipped", "labelled keep", "labelled drop",
              "labelled inspect"]
    return "## Baseline pass@1 per category\n\n" + intro + _table(header, rows) + chart


def _labels(report: DeliveryReport) -> str | None:
    if report.calibration is None:
        return None
    k = report.calibration.k
    rows = [[t.task_id, t.category, t.side, f"{t.successes}/{t.attempts}", _pct(t.pass_rate),
             _interval(t.pass_rate_low, t.pass_rate_high), _num(t.pass_at_1), _num(t.pass_at_k), _num(t.pass_hat_k),
             t.label or "-", t.decision, ", ".join(t.flags) or "-"] for t in report.tasks]
    header = ["task", "category", "split side", "attempts passed", "pass rate", "95% Wilson", "pass@1", f"pass@{k}",
              f"pass^{k}", "label", "decision", "flags"]
    legend = ("Labels (from the pass rate alone): keep (solved sometimes: learning signal), drop (always solved), "
              "inspect (never solved). Decision: removed when any reason below applies, whatever the label.\n\n")
    return "## Keep / drop / inspect\n\n" + legend + _table(header, rows)


def _listing(title: str, tasks: list[RemovedTask], empty: str) -> str:
    if not tasks:
        return f"## {title}\n\n{empty}\n"
    lines = [f"- **{t.task_id}**: " + "; ".join(t.reasons) for t in tasks]
    return f"## {title}\n\n" + "\n".join(lines) + "\n"


def _split(report: DeliveryReport) -> str:
    s = report.split
    if s is None:
        return "## Held-out split\n\nNo split.json: run `rubric split` first.\n"
    removed = ", ".join(s.removed_heldout) or "none"
    intro = (f"Seed {s.seed}, held-out share asked {s.heldout_fraction:g}: {s.heldout_shipped} held out and "
             f"{s.training_shipped} for training ship. The policy: {s.policy}. Removed from the held-out side: "
             f"{removed}; from the training side: {len(s.removed_training)}. {s.groups} groups "
             f"({s.multi_task_groups} with two or more tasks) joined by `group` label and by near-twin instructions "
             f"(character 5-gram Jaccard >= {s.similarity_threshold:g}); no group straddles the split.\n\n")
    rows = [[c, str(n.all_tasks), str(n.training_shipped), str(n.heldout_shipped), str(n.removed)]
            for c, n in s.by_category.items()]
    header = ["category", "all tasks", "training, shipped", "held-out, shipped", "removed (either side)"]
    twins = "".join(f"- {p.a} ~ {p.b} (Jaccard {p.jaccard:.3f})\n" for p in s.near_duplicates) or "- none\n"
    return "## Held-out split\n\n" + intro + _table(header, rows) + "\nNear twins:\n\n" + twins
