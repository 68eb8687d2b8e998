"""The text report of `rubric judge-eval`: its output dict as tables."""

from __future__ import annotations

from typing import Any


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.2f}"


def render_report(title: str, report: dict[str, Any]) -> str:
    lines = [title, f"  {'item':<22} {'n':>4} {'pos':>4} {'err':>4}  {'acc':>5} {'bal':>5} {'kappa':>5} "
                    f"{'brier':>5} {'auc':>5} {'thr':>5}"]
    rows = list(report["per_item"].items()) + [("OVERALL", report["overall"])]
    for name, a in rows:
        threshold = report["thresholds"].get(name)
        lines.append(f"  {name:<22} {a['n']:>4} {a['positives']:>4} {a['errors']:>4}  {_fmt(a['accuracy'])} "
                     f"{_fmt(a['balanced_accuracy'])} {_fmt(a['kappa'])} {_fmt(a['brier'])} {_fmt(a.get('auc'))} {_fmt(threshold)}")
    return "\n".join(lines) + "\n"


def _agreement_row(name: str, a: dict[str, Any], pairs: float | None = None) -> str:
    return (f"  {name:<34} {a['n']:>4} {a['positives']:>4} {a['errors']:>4}  {_fmt(a['accuracy'])} "
            f"{_fmt(a['balanced_accuracy'])} {_fmt(a['kappa'])} {_fmt(a['brier'])} {_fmt(a.get('auc'))} {_fmt(pairs)}")


def render_domain_report(output: dict[str, Any]) -> str:
    cv = output["cross_validation"]
    header = (f"  {'calibration / labels':<34} {'n':>4} {'pos':>4} {'err':>4}  {'acc':>5} {'bal':>5} {'kappa':>5} "
              f"{'brier':>5} {'auc':>5} {'pairs':>5}")
    lines = ["calibration fitted leaving each domain out (the headline: what a new rubric gets), in-sample, and as"
             " shipped", "(pairs: clear same-item pairs where the met one has the higher probability)", header]
    shipped = output["as_shipped"]
    for title, block in (("held-out domain", cv["leave_one_domain_out"]), ("in-sample", cv["in_sample"]),
                         ("as shipped", shipped)):
        for difficulty in ("clear", "hard", "all"):
            pairs = block["clear_pairs_ranked"] if difficulty == "clear" else None
            lines.append(_agreement_row(f"{title}: {difficulty}", block["by_difficulty"][difficulty], pairs))
    lines.append("held-out figures per domain (clear labels):")
    for domain, block in cv["leave_one_domain_out"]["per_domain"].items():
        lines.append(_agreement_row(domain, block["by_difficulty"]["clear"], block["clear_pairs_ranked"]))
    for name, fit in cv["in_sample"]["fits"].items():
        lines.append(f"in-sample fit of {name}: scale = {fit['scale']:.4f}  offset = {fit['offset']:.4f}")
    return "\n".join(lines) + "\n"


def render_panel(panel: dict[str, Any]) -> str:
    from rubrics.judges.panel.agreement import PanelAgreement, describe

    lines = [describe(PanelAgreement(**panel["agreement"])), "each member alone against the labels:"]
    lines += [_agreement_row(name, a) for name, a in panel["members"].items()]
    return "\n".join(lines) + "\n"


def render(output: dict[str, Any]) -> str:
    parts = [f"judge: {output['judge']}   labels judged: {output['labels']}\n"]
    if "panel" in output:
        parts.append(render_panel(output["panel"]))
    for name, c in output.get("calibration", {}).items():
        parts.append(f"{name} calibration (logistic fit, in-sample): scale = {c['scale']:.4f}  "
                     f"offset = {c['offset']:.4f}\n")
    parts.append(render_report("agreement with the labels" + (" (calibrated in-sample)"
                                                               if "calibration" in output else ""),
                               output["report"]))
    if "fitted_thresholds" in output:
        parts.append(render_report("with fitted per-item thresholds (in-sample, optimistic)",
                                   output["report_with_fitted_thresholds"]))
        parts.append(render_report("with thresholds fitted leaving each trajectory out (honest estimate)",
                                   output["leave_one_trajectory_out"]))
        parts.append("proposed thresholds (item: threshold):\n" + "".join(
            f"  {k}: {v:.3f}\n" for k, v in output["fitted_thresholds"].items()))
    if "cross_validation" in output:
        parts.append(render_domain_report(output))
    if "engine" in output:
        parts.append("engine: " + ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in output["engine"].items()) + "\n")
    return "\n".join(parts)
