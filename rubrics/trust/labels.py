"""Labels and the judge's verdicts on them.

A labels file has one JSON object a line: {"trajectory": PATH or {inline trajectory}, "item_id": ID, "met": BOOL},
optionally "difficulty": "clear" | "hard" (plainly decided by the evidence, or needing inference), "near_miss": true
on an unmet label whose work addresses the criterion and gets it wrong (a wrong number, the wrong recipient, half of
a two-part requirement, an action claimed but not taken), "domain" (default: the name of the labels file's folder)
and a free "note". A PATH is relative to the labels file; "file.jsonl#ID"
picks the trajectory with that id out of a JSONL file.
Every labelled trajectory is graded once, all in one `score_many` batch, and each label is compared with the
judge's verdict on that item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rubrics.judges.protocol import JudgeRequest, MemberVerdict, Verdict


DIFFICULTIES = ("clear", "hard")


class LabelsError(ValueError):
    """A labels file that cannot be read; the message names file:line."""


@dataclass(frozen=True)
class Label:
    trajectory_key: str  # where the trajectory came from (for grading each one once)
    trajectory: Any  # rubrics.trajectory.Trajectory
    item_id: str
    met: bool
    source: str  # "labels.jsonl:12"
    domain: str = ""
    difficulty: str | None = None  # "clear" | "hard"; None when the labels file does not say
    near_miss: bool = False   # unmet, though the work addresses the criterion (and gets it wrong)


@dataclass(frozen=True)
class Judged:
    label: Label
    probability: float | None
    error: str | None
    members: tuple[MemberVerdict, ...] = ()   # a panel judge's members' verdicts
    # unmet without asking the judge (no evidence at all, or a missing fact): probability 0, and no raw score for a
    # calibration fit
    no_evidence: bool = False
    facts_missing: bool = False   # of those, the ones a missing fact decided

    @property
    def item_id(self) -> str:
        return self.label.item_id


def load_labels(path: str | Path) -> list[Label]:
    from rubrics.trajectory.json_text import loads, text_lines
    from rubrics.trajectory import load_trajectory

    path = Path(path)
    labels: list[Label] = []
    cache: dict[str, Any] = {}
    for text_line in text_lines(path.read_bytes()):
        line, where = text_line.text, f"{path}:{text_line.number}"
        if text_line.error is not None:
            raise LabelsError(f"{where}: {text_line.error}")
        if not line.strip():
            continue
        try:
            row = loads(line)
            ref, met, item_id = row["trajectory"], row["met"], row["item_id"]
        except (ValueError, KeyError, TypeError) as exc:   # JSONTextError is a ValueError, with its column
            raise LabelsError(f"{where}: expected {{trajectory, item_id, met}} as JSON: {exc}") from exc
        if not isinstance(met, bool) or not isinstance(item_id, str):
            raise LabelsError(f"{where}: 'met' must be true or false and 'item_id' a string")
        difficulty, domain = row.get("difficulty"), row.get("domain", path.resolve().parent.name)
        if difficulty not in (None, *DIFFICULTIES):
            raise LabelsError(f"{where}: 'difficulty' must be one of {', '.join(DIFFICULTIES)}, got {difficulty!r}")
        if not isinstance(domain, str) or not domain:
            raise LabelsError(f"{where}: 'domain' must be a non-empty string")
        near_miss = row.get("near_miss", False)
        if not isinstance(near_miss, bool) or (near_miss and met):
            raise LabelsError(f"{where}: 'near_miss' must be true or false, and true only on an unmet label")
        if isinstance(ref, dict):
            key = f"{where}"
            trajectory = load_trajectory(ref)
        elif isinstance(ref, str):
            key = str((path.parent / ref).resolve())
            if key not in cache:
                cache[key] = _load_referenced(path.parent, ref, where)
            trajectory = cache[key]
        else:
            raise LabelsError(f"{where}: 'trajectory' must be a path or an inline trajectory object")
        labels.append(Label(key, trajectory, item_id, met, where, domain, difficulty, near_miss))
    return labels


def _load_referenced(base: Path, ref: str, where: str) -> Any:
    from rubrics.trajectory import iter_trajectory_file, load_trajectory

    file_part, _, wanted_id = ref.partition("#")
    file = base / file_part
    if not file.exists():
        raise LabelsError(f"{where}: trajectory file {file} not found")
    if not wanted_id:
        try:
            return load_trajectory(file)
        except Exception as exc:  # noqa: BLE001 - reported with the label's line
            raise LabelsError(f"{where}: {exc}") from exc
    for loaded in iter_trajectory_file(file):
        if not isinstance(loaded, Exception) and loaded.id == wanted_id:
            return loaded
    raise LabelsError(f"{where}: no trajectory with id {wanted_id!r} in {file}")


class ExamplesRemoved:
    """A judge wrapper that drops the few-shot examples of every request (judge-eval --no-examples)."""

    def __init__(self, judge: Any):
        self.inner = judge
        self.name = judge.name

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return self.inner.judge([replace(request, item=replace(request.item, examples=())) for request in requests])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def judge_labels(labels: Sequence[Label], rubric: Any, judge: Any,
                 comparisons: int | None = None) -> tuple[list[Judged], list[str]]:
    """Grade each labelled trajectory once (one batch) and pair each label with the judge's probability.
    comparisons: grade the labelled trajectories as one group of attempts (rubrics.score_group, each attempt
    compared with that many others), as the attempts of one task, which the trajectories of a labelled set are."""
    from rubrics.grading.groups import score_group
    from rubrics.grading.scoring import score_many

    keys = list(dict.fromkeys(label.trajectory_key for label in labels))
    trajectories = {label.trajectory_key: label.trajectory for label in labels}
    ordered = [trajectories[key] for key in keys]
    results = score_many(ordered, rubric, judge=judge) if comparisons is None else \
        score_group(ordered, rubric, judge, comparisons=comparisons)
    by_key = {key: {item.id: item for item in result.items} for key, result in zip(keys, results)}
    judged, skipped = [], []
    for label in labels:
        item = by_key[label.trajectory_key].get(label.item_id)
        if item is None or item.method != "judge":
            skipped.append(f"{label.source}: {label.item_id!r} is not a judge item of rubric {rubric.id}")
            continue
        if item.status == "unmet" and item.probability is None:   # decided without the judge: nothing to judge
            judged.append(Judged(label, 0.0, None, no_evidence=True, facts_missing=bool(item.facts_missing)))
            continue
        judged.append(Judged(label, item.probability, item.error if item.status == "error" else None,
                             tuple(item.members or ())))
    return judged, skipped
