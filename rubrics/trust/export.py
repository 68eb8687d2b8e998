"""What `rubric judge-eval --json OUT` writes beyond the printed report: one row per evaluated label, with the
judge's probability, the threshold it was counted with, and the evidence the judge read and its rationale, so that
`rubric view OUT` can draw the reliability diagram and show each disagreement with its evidence.

The judge is wrapped to record each verdict's request: the labelled items' results keep only a probability.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from rubrics.rubric.compiler import item_id_of

KIND = "rubric-judge-eval"   # the "kind" of the file, so `rubric view` knows what it was given


class EvidenceText(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    text: str


class LabelRow(BaseModel):
    model_config = ConfigDict(frozen=True)
    source: str                    # labels.jsonl:12
    trajectory_id: str
    item_id: str
    domain: str
    difficulty: str | None
    met: bool                      # the human label
    probability: float | None      # the judge's; None when it failed (error says why)
    error: str | None
    threshold: float
    rationale: str | None = None
    evidence: list[EvidenceText] = []


class VerdictRecorder:
    """A judge wrapper that keeps, per (trajectory id, item id), the evidence blocks sent and the rationale back."""

    def __init__(self, judge: Any):
        self.inner = judge
        self.name = judge.name
        self.seen: dict[tuple[str, str], tuple[list[EvidenceText], str | None]] = {}

    def judge(self, requests: Sequence[Any]) -> list[Any]:
        verdicts = self.inner.judge(requests)
        for request, verdict in zip(requests, verdicts):
            blocks = [EvidenceText(name=b.name, text=b.text) for b in request.context.evidence]
            # an item judged part by part ("ITEM#N" requests) shows its evidence once, under the item
            self.seen[(request.context.trajectory_id, item_id_of(request.item.id))] = (blocks, verdict.rationale)
        return verdicts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def label_rows(judged: Sequence[Any], thresholds: dict[str, float], recorder: VerdictRecorder | None) -> list[LabelRow]:
    rows = []
    for j in judged:
        trajectory_id = getattr(j.label.trajectory, "id", "")
        blocks, rationale = recorder.seen.get((trajectory_id, j.item_id), ([], None)) if recorder else ([], None)
        rows.append(LabelRow(source=j.label.source, trajectory_id=trajectory_id, item_id=j.item_id,
                             domain=j.label.domain, difficulty=j.label.difficulty, met=j.label.met,
                             probability=j.probability, error=j.error, threshold=thresholds.get(j.item_id, 0.5),
                             rationale=rationale, evidence=blocks))
    return rows


def export(output: dict[str, Any], rows: Sequence[LabelRow]) -> dict[str, Any]:
    return {"kind": KIND, **output, "label_rows": [row.model_dump(mode="json") for row in rows]}
