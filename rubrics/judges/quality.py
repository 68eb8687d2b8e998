"""The measured quality of each catalog judge model, as `rubric model list` shows it.

benchmarks/judge_quality.py --write-calibration (and --write-head) records its figures in rubrics/judges/calibrations/quality.json: per
catalog model, the model's default method, balanced accuracy on clear and on hard labels with the calibration
fitted where the figure was not measured (the held-out domains of the split, or each domain left out in turn), and judgments per second on the machine it ran on.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

QUALITY_FILE = Path(__file__).parent / "calibrations" / "quality.json"
ON_THE_SPLIT = "held-out domains of examples/labels/split.yaml"   # a figure's measured_on, when on the fixed split


def quality_table() -> dict[str, Any]:
    try:
        return json.loads(QUALITY_FILE.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def measured_quality(catalog_name: str) -> str | None:
    """'0.66 / 0.34 (choice, 9 domains)' for a measured model (where: the held-out domains of the split, or each of
    the nine first domains left out in turn); None for one never measured."""
    entry = quality_table().get("models", {}).get(catalog_name)
    if not entry:
        return None
    clear, hard = entry.get("clear_balanced_accuracy"), entry.get("hard_balanced_accuracy")
    if clear is None:
        return None
    measured_on = entry.get("methods", {}).get(entry.get("method"), {}).get("measured_on", "")
    # two measures live side by side until every model is measured on the split: say which one a figure is
    where = "split" if measured_on == ON_THE_SPLIT else "9 domains"
    return f"{clear:.2f} / {'-' if hard is None else f'{hard:.2f}'} ({entry.get('method')}, {where})"
