"""A grading dataset: a JSON Lines file whose every line pairs a trajectory with its rubric.

    {"trajectory": {...} | [chat messages] | "runs/a.json", "rubric": {...} | "rubrics/a.yaml"}

A string is a path relative to the dataset file; an object is inline. A path resolves (its symlinks followed)
inside the dataset's folder, or inside a folder given as allow_outside (`rubric grade --allow-outside PATH`);
any other path, `../../etc/shadow` or `/etc/shadow`, is refused without being opened. A line that cannot be used
(bad JSON, a missing or unknown field, a trajectory or rubric that does not load) is reported as
`file:line: field X: why` and costs only itself. A named file that does not load and is not a rubric (or a
trajectory) at all -- no rubric field at its top level, no chat messages -- is reported by the position and kind
of its problems only: the error never echoes the content of a file that is not ours to show.
A rubric file named by many lines is loaded and compiled once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubrics.grading.jobs import Job, PlanCache, RubricFailure
from rubrics.rubric.spec import Band

FIELDS = ("trajectory", "rubric")


@dataclass
class Dataset:
    jobs: list[Job] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # "file:line: field X: why", one per unusable line


def _one_line(text: str) -> str:
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())


RUBRIC_FIELDS = ("version", "id", "task", "criteria", "gates")


def _trajectory(value: Any, base: Path, default_id: str, allowed: tuple[Path, ...] = ()):
    """A Trajectory, or the reason it cannot be loaded (a string)."""
    from rubrics.trajectory import TrajectoryError, load_trajectory
    from rubrics.trajectory.paths import looks_like_trajectory_file

    if isinstance(value, str):
        path = _named_file(base, value, allowed, "trajectory")
        if isinstance(path, str):
            return path
        try:
            return load_trajectory(path)
        except TrajectoryError as exc:
            return str(exc) if looks_like_trajectory_file(path) else _content_free(path, "trajectory", str(exc))
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


def _named_file(base: Path, value: str, allowed: tuple[Path, ...], kind: str) -> Path | str:
    """The existing file a line names, confined to the dataset's folder (and the allowed ones); else why not."""
    from rubrics.input_files import confined

    try:
        path = confined(base, value, allowed)
    except (OSError, ValueError) as exc:
        return str(exc)
    return path if path.exists() else f"no such {kind} file {str(base / value)!r}"


def _rubric(value: Any, base: Path, plans: PlanCache, uncertain: Band | None, allowed: tuple[Path, ...] = ()):
    """A Plan, or the reason the rubric cannot be used (a string)."""
    path = None
    if isinstance(value, str):
        path = _named_file(base, value, allowed, "rubric")
        if isinstance(path, str):
            return path
        value = path
    elif not isinstance(value, dict):
        return f"expected an object or a path, got {type(value).__name__}"
    plan = plans.plan_or_failure(value, uncertain)
    if not isinstance(plan, RubricFailure):
        return plan
    if path is not None and not _looks_like_rubric(path):
        return _content_free(path, "rubric", plan.message)
    return _one_line(plan.message)


def _looks_like_rubric(path: Path) -> bool:
    """Whether the file reads as a YAML mapping with at least one rubric field at its top level."""
    from rubrics.rubric.load import read_rubric

    try:
        data = read_rubric(path)[0]
    except Exception:  # noqa: BLE001 - unreadable: not shown either way
        return False
    return isinstance(data, dict) and any(name in data for name in RUBRIC_FIELDS)


def _content_free(path: Path, kind: str, message: str) -> str:
    """What went wrong with a file that is not a rubric (or a trajectory), without a word of its content: the
    number of problems, the first one's position, and the problem codes of the loader's message only."""
    import re

    positions = re.findall(re.escape(str(path)) + r":(\d+)(?::(\d+))?", message)
    codes = sorted(set(re.findall(r"\[([a-z0-9-]+)\](?= \||$)", message, re.MULTILINE)))
    details = []
    if positions:
        line, column = positions[0]
        details.append(f"{len(positions)} problem{'s' if len(positions) != 1 else ''}, the first at line {line}"
                       + (f", column {column}" if column else ""))
    if codes:
        details.append(", ".join(codes))
    shown = f" ({'; '.join(details)})" if details else ""
    return f"{str(path)!r} is not a {kind} file{shown}; its content is not shown"


def read_dataset(path: str | Path, uncertain: Band | None = None, plans: PlanCache | None = None,
                 allow_outside: tuple[str | Path, ...] | list = ()) -> Dataset:
    """The jobs and errors of a dataset file; its lines' paths resolve inside its folder, or inside a folder of
    allow_outside."""
    from rubrics.input_files import read_input_file
    from rubrics.trajectory.json_text import JSONTextError, loads, text_lines

    path = Path(path)
    allowed = tuple(Path(folder) for folder in allow_outside)
    dataset = Dataset()
    try:
        data = read_input_file(path).removeprefix(b"\xef\xbb\xbf")
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
        trajectory = _trajectory(entry["trajectory"], path.parent, f"{path.stem}:{line.number}", allowed)
        plan = _rubric(entry["rubric"], path.parent, plans, uncertain, allowed)
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
