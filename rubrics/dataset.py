"""A grading dataset: a JSON Lines file whose every line pairs a trajectory with its rubric.

    {"trajectory": {...} | [chat messages] | "runs/a.json", "rubric": {...} | "rubrics/a.yaml"}

A string is a path relative to the dataset file; an object is inline. A line that cannot be used (bad JSON, a
missing or unknown field, a trajectory or rubric that does not load) is reported as `file:line: field X: why`
and costs only itself. A rubric file named by many lines is loaded and compiled once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubrics.expectation import Band
from rubrics.jobs import Job, PlanCache, RubricFailure

FIELDS = ("trajectory", "rubric")


@dataclass
class Dataset:
    jobs: list[Job] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # "file:line: field X: why", one per unusable line


def _one_line(text: str) -> str:
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())


def _trajectory(value: Any, base: Path, default_id: str):
    """A Trajectory, or the reason it cannot be loaded (a string)."""
    from rubrics.trajectory import TrajectoryError, load_trajectory

    if isinstance(value, str):
        path = base / value
        if not path.is_file():
            return f"no such trajectory file {str(path)!r}"
        try:
            return load_trajectory(path)
        except TrajectoryError as exc:
            return str(exc)
    if isinstance(value, dict) and value.get("id") is None:
        value = {**value, "id": default_id}
    elif isinstance(value, list):
        value = {"id": default_id, "messages": value}
    if not isinstance(value, dict):
        return f"expected an object, a list of chat messages or a path, got {type(value).__name__}"
    try:
        return load_trajectory(value)
    except TrajectoryError as exc:
        return str(exc).removeprefix("<trajectory>: ")


def _rubric(value: Any, base: Path, plans: PlanCache, uncertain: Band | None):
    """A Plan, or the reason the rubric cannot be used (a string)."""
    if isinstance(value, str):
        path = base / value
        if not path.is_file():
            return f"no such rubric file {str(path)!r}"
        value = path
    elif not isinstance(value, dict):
        return f"expected an object or a path, got {type(value).__name__}"
    plan = plans.plan_or_failure(value, uncertain)
    return _one_line(plan.message) if isinstance(plan, RubricFailure) else plan


def read_dataset(path: str | Path, uncertain: Band | None = None, plans: PlanCache | None = None) -> Dataset:
    from rubrics.json_text import JSONTextError, loads, text_lines

    path = Path(path)
    dataset = Dataset()
    try:
        data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    except (OSError, ValueError) as exc:
        dataset.errors.append(f"{path}: error: cannot read: {exc}")
        return dataset
    plans = plans or PlanCache(limit=1 << 30)
    for line in text_lines(data):
        where = f"{path}:{line.number}"
        if line.error is not None:
            dataset.errors.append(f"{where}: error: {line.error}")
            continue
        if line.blank:
            continue
        try:
            entry = loads(line.text)
        except JSONTextError as exc:
            dataset.errors.append(f"{where}: error: {exc}")
            continue
        problem = _entry_problem(entry)
        if problem:
            dataset.errors.append(f"{where}: error: {problem}")
            continue
        trajectory = _trajectory(entry["trajectory"], path.parent, f"{path.stem}:{line.number}")
        plan = _rubric(entry["rubric"], path.parent, plans, uncertain)
        if isinstance(trajectory, str):
            dataset.errors.append(f"{where}: error: field trajectory: {trajectory}")
        if isinstance(plan, str):
            dataset.errors.append(f"{where}: error: field rubric: {plan}")
        if not isinstance(trajectory, str) and not isinstance(plan, str):
            trajectory.source = where
            dataset.jobs.append(Job(plan, trajectory))
    if not dataset.jobs and not dataset.errors:
        dataset.errors.append(f"{path}: error: no entries")
    return dataset


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return f"expected an object with fields {', '.join(FIELDS)}, got {type(entry).__name__}"
    missing = [name for name in FIELDS if name not in entry]
    if missing:
        return f"field {missing[0]}: missing"
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        return f"field {unknown[0]}: unknown (a line has {', '.join(FIELDS)})"
    return None
