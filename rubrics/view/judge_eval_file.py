"""Reading `rubric judge-eval` JSON for the viewer: agreement per item, a reliability diagram, the disagreements.

Both `--format json` (the report alone) and `--json OUT` (the report and one row per label) open; only the latter
carries what the diagram and the disagreements need, and the page says so when it is missing.
"""
from __future__ import annotations

from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from rubrics.trajectory.json_text import loads
from rubrics.trust.lifecycle import Agreement, LabelRow

BINS = 10


def _agreement_fields() -> dict[str, Any]:
    """The figures of rubrics.trust's Agreement, as pydantic fields (a figure missing from an older file
    defaults as the dataclass says)."""
    hints = get_type_hints(Agreement)
    return {f.name: (hints[f.name], ... if f.default is MISSING else f.default) for f in fields(Agreement)}


# One item's agreement as judge-eval wrote it: Agreement's figures, plus the item and its threshold.
ItemAgreement = create_model("ItemAgreement", __config__=ConfigDict(frozen=True), item_id=(str, ...),
                             threshold=(float | None, ...), **_agreement_fields())


class ReliabilityBin(BaseModel):
    model_config = ConfigDict(frozen=True)
    low: float
    high: float
    count: int
    mean_probability: float | None
    observed_rate: float | None     # the share of labels met among the bin's


class JudgeEvalView(BaseModel):
    model_config = ConfigDict(frozen=True)
    file: str
    judge: str
    labels: int
    overall: ItemAgreement
    items: list[ItemAgreement]
    has_label_rows: bool
    bins: list[ReliabilityBin]
    disagreements: list[LabelRow]


class NotJudgeEval(ValueError):
    """The file is not judge-eval output (it may be a results file)."""


class BadJudgeEval(ValueError):
    """The file says it is judge-eval output, but its report does not read."""


def looks_like_judge_eval(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("report"), dict) and "per_item" in data["report"]


def load_judge_eval(path: str | Path) -> JudgeEvalView:
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    try:
        data = loads(text)
    except ValueError as exc:
        raise NotJudgeEval(str(exc)) from exc
    if not looks_like_judge_eval(data):
        raise NotJudgeEval("no judge-eval report in it")
    try:
        return build_view(str(path), data)
    except (ValidationError, TypeError, KeyError, AttributeError) as exc:
        raise BadJudgeEval(f"{path}: a judge-eval report that does not read: {exc}") from exc


def build_view(file: str, data: dict[str, Any]) -> JudgeEvalView:
    report = data["report"]
    thresholds = report.get("thresholds") or {}
    items = [ItemAgreement(item_id=name, threshold=thresholds.get(name), **figures)
             for name, figures in report["per_item"].items()]
    rows = [LabelRow.model_validate(row) for row in data.get("label_rows") or []]
    disagreements = [r for r in rows if r.probability is not None and (r.probability >= r.threshold) != r.met]
    return JudgeEvalView(file=file, judge=str(data.get("judge", "?")), labels=int(data.get("labels", len(rows))),
                         overall=ItemAgreement(item_id="overall", threshold=None, **report["overall"]),
                         items=items, has_label_rows="label_rows" in data, bins=reliability(rows),
                         disagreements=disagreements)


def reliability(rows: list[LabelRow], bins: int = BINS) -> list[ReliabilityBin]:
    """Probabilities in equal-width bins, each with the observed rate of met labels; a calibrated judge's points
    lie on the diagonal."""
    scored = [r for r in rows if r.probability is not None]
    out = []
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        inside = [r for r in scored if low <= r.probability < high or (b == bins - 1 and r.probability == 1.0)]
        out.append(ReliabilityBin(
            low=low, high=high, count=len(inside),
            mean_probability=sum(r.probability for r in inside) / len(inside) if inside else None,
            observed_rate=sum(r.met for r in inside) / len(inside) if inside else None))
    return out
