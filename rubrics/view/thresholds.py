"""Each judge item's threshold and uncertain band, for drawing its probability bar.

Results do not carry them. With the rubric given (`rubric view --rubric R.yaml`), they are the compiled rubric's,
exactly as grading used them; otherwise the threshold the judge's evidence states ("... (threshold 0.6)") when it
states one, else the defaults, and the page says which.
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rubrics.rubric.compiler import DEFAULT_THRESHOLD
from rubrics.result import ItemResult

DEFAULT_BAND = (0.35, 0.65)
_STATED = re.compile(r"\(threshold ([01](?:\.\d+)?)\)")


class JudgeBand(BaseModel):
    model_config = ConfigDict(frozen=True)
    threshold: float
    low: float
    high: float
    source: Literal["rubric", "evidence", "default"]


RubricBands = dict[str, dict[str, JudgeBand]]   # rubric id -> item id -> band


def rubric_bands(paths: list[str]) -> RubricBands:
    """Raises the loader's errors (a rubric that does not load is the user's to fix, not to guess around)."""
    from rubrics.rubric.compiler import compile_rubric
    from rubrics.rubric.load import load_rubric

    out: RubricBands = {}
    for path in paths:
        plan = compile_rubric(load_rubric(path))
        out[plan.rubric.id] = {step.item.id: JudgeBand(threshold=step.threshold, low=step.uncertain[0],
                                                       high=step.uncertain[1], source="rubric")
                               for step in plan.judge_steps}
    return out


def band_for(rubric_id: str, item: ItemResult, known: RubricBands) -> JudgeBand:
    if item.id in known.get(rubric_id, {}):
        return known[rubric_id][item.id]
    stated = _STATED.search(item.evidence[:2000])
    if stated:
        return JudgeBand(threshold=float(stated.group(1)), low=DEFAULT_BAND[0], high=DEFAULT_BAND[1], source="evidence")
    return JudgeBand(threshold=DEFAULT_THRESHOLD, low=DEFAULT_BAND[0], high=DEFAULT_BAND[1], source="default")
