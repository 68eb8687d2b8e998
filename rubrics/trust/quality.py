"""The catalog's quality table: the measured quality of each catalog judge model, as `rubric model list` shows it.

rubrics.trust.lifecycle (benchmarks/judge_quality.py --write-calibration, --write-head, --record-quality) records
its figures in rubrics/judges/fitted/calibrations/quality.json: per catalog model, the model's default method,
balanced accuracy on clear and on hard labels with the calibration fitted where the figure was not measured (the
held-out domains of the split, or each domain left out in turn), and judgments per second on the machine it ran on.
"""
from __future__ import annotations

import json
from typing import Any

from rubrics.judges.fitted.judge_models import CALIBRATIONS

QUALITY_FILE = CALIBRATIONS / "quality.json"
ON_THE_SPLIT = "held-out domains of examples/labels/split.yaml"   # a figure's measured_on, when on the fixed split


def quality_table() -> dict[str, Any]:
    try:
        return json.loads(QUALITY_FILE.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def measured_quality(catalog_name: str, quantization: str | None = None) -> str | None:
    """'0.66 / 0.34 (choice, 9 domains)' for a measured model (where: the held-out domains of the split, or each of
    the nine first domains left out in turn), computing with ``quantization`` (None: float32); None for one never
    measured so."""
    entry = quality_table().get("models", {}).get(catalog_name)
    if entry and quantization:
        entry = entry.get("quantized", {}).get(quantization)
    if not entry:
        return None
    clear, hard = entry.get("clear_balanced_accuracy"), entry.get("hard_balanced_accuracy")
    if clear is None:
        return None
    measured_on = entry.get("methods", {}).get(entry.get("method"), {}).get("measured_on", "")
    # two measures live side by side until every model is measured on the split: say which one a figure is
    where = "split" if measured_on == ON_THE_SPLIT else "9 domains"
    return f"{clear:.2f} / {'-' if hard is None else f'{hard:.2f}'} ({entry.get('method')}, {where})"


QUALITY_ABOUT = ("benchmarks/judge_quality.py --write-calibration, --write-head, --record-quality: balanced accuracy "
                 "and the other figures per catalog model and method; measured_on says where (the held-out domains "
                 "of the split, the calibration fitted on its training domains or, where calibration says so, the "
                 "shipped one; or each of the nine first domains left out in turn)")


def existing_quality_table() -> dict[str, Any]:
    """quality.json as it is: a head's or a recorded figure sits beside the zero-shot figures, never alone."""
    table = quality_table()
    if not table:
        raise SystemExit(f"{QUALITY_FILE}: missing; write the zero-shot figures first (--write-calibration)")
    return table


def record_quality(table: dict, name: str, quantization: str | None, reports: dict[str, dict]) -> None:
    """The reports' headline figures into the model's entry of quality.json (an int8 model's beside its float32
    ones), the entry's own headline being its default method's; then the file is written."""
    from rubrics.judges.fitted.judge_models import JUDGE_MODELS

    table["about"] = QUALITY_ABOUT
    entry = table["models"].setdefault(name, {"methods": {}})
    if quantization:   # the same model computing another way: its own figures, beside the float32 ones
        entry = entry.setdefault("quantized", {}).setdefault(quantization, {"methods": {}})
    for method, report in reports.items():
        entry["methods"][method] = quality_entry(report)
    best = JUDGE_MODELS[name].method
    if best in entry["methods"]:
        entry.update(method=best, **{k: entry["methods"][best][k] for k in
                                     ("clear_balanced_accuracy", "hard_balanced_accuracy")})
    QUALITY_FILE.write_text(json.dumps(table, indent=1) + "\n")


def quality_entry(report: dict) -> dict:
    """A method's headline figures as quality.json keeps them: on the split's held-out domains with the calibration
    fitted on its training domains (or, from --record-quality, the shipped one), else each domain left out in turn."""
    if "held_out" in report:
        headline, where = report["held_out"], {"measured_on": ON_THE_SPLIT}
    elif "held_out_as_shipped" in report:
        headline, where = report["held_out_as_shipped"], {"measured_on": ON_THE_SPLIT, "calibration": "as shipped"}
    else:
        headline, where = report["leave_one_domain_out"], {"measured_on": "each domain left out in turn"}
    held_out = headline["by_difficulty"]
    return {**where,
            "clear_balanced_accuracy": held_out["clear"]["balanced_accuracy"],
            "hard_balanced_accuracy": held_out["hard"]["balanced_accuracy"],
            "clear_auc": held_out["clear"]["auc"], "hard_auc": held_out["hard"]["auc"],
            "clear_pairs_ranked": headline["clear_pairs_ranked"],
            "near_misses_caught": headline.get("near_misses_caught"),
            "brier": held_out["all"]["brier"]}
