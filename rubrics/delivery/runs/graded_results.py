"""Read `rubric grade --format jsonl` output: one Result per line, the fields the pass rates need.

A reference run (the task's solution.patch applied, or a reviewer's gold trajectory) is marked by its
trajectory id: it is `reference` or ends with `reference` after one of `/ : # . _ -`, for example
`task-0417/reference` or `task-0417:reference`. Reference runs are not attempts: they prove the task
solvable, and one that fails marks the task flaky or broken.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rubrics.trajectory.json_text import JSONTextError, escape_surrogates, loads, text_lines

_REFERENCE_ID = re.compile(r"(?:^|[/:#._-])reference$", re.IGNORECASE)


class GradedAttempt(BaseModel):
    # A Result carries much more (items, earned, total); the pass rates need only these.
    model_config = ConfigDict(extra="ignore")

    trajectory_id: str = Field(min_length=1)
    task_id: str | None = None
    score: float = Field(ge=0, le=1)
    complete: bool = True
    # Provenance: `rubric grade` lines name their rubric and judge, `rubric tasks run` lines their grader.
    rubric_id: str | None = None
    judge: str | None = None
    grader: dict | None = None

    def grader_label(self) -> str:
        g = self.grader or {}
        if "runtime" in g:
            return (f"grade.sh via rubric tasks run ({g.get('runtime')}; {g.get('wall_s', 0):g}s, "
                    f"{g.get('memory_mb')} MiB, {g.get('processes')} processes)")
        return "rubric grade" if self.rubric_id else "unknown"

    @field_validator("trajectory_id", "task_id", mode="before")
    @classmethod
    def _writable(cls, value: object) -> object:
        # The spelling `rubric grade` writes, so the id validates and pass_rates.json encodes as UTF-8.
        return escape_surrogates(value) if isinstance(value, str) else value

    @property
    def is_reference(self) -> bool:
        return bool(_REFERENCE_ID.search(self.trajectory_id))


@dataclass
class ResultsFile:
    attempts: list[GradedAttempt]
    problems: list[str]   # "file:line: message" for lines that are not usable Results


def read_results(path: Path, shown: str | None = None) -> ResultsFile:
    """Every usable Result in the file; a bad line is reported and skipped, never fatal."""
    shown = shown or str(path)
    attempts, problems = [], []
    for line in text_lines(path.read_bytes()):
        if line.text is not None and not line.text.strip():
            continue
        try:
            attempts.append(_attempt(line))
        except _Unusable as exc:
            problems.append(f"{escape_surrogates(shown)}:{line.number}: {exc}")
    return ResultsFile(attempts, problems)


class _Unusable(Exception):
    """A results line that is not a usable Result; the message says why."""


def _attempt(line) -> GradedAttempt:
    if line.error is not None:
        raise _Unusable(str(line.error))
    try:
        data = loads(line.text)
    except JSONTextError as exc:
        raise _Unusable(str(exc)) from None
    if isinstance(data, dict) and "score" not in data and "error" in data:
        raise _Unusable(escape_surrogates(f"not graded: {data['error']}"))
    try:
        attempt = GradedAttempt.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(line)"
        raise _Unusable(escape_surrogates(f"{field}: {first['msg']}")) from None
    if attempt.task_id is None:
        raise _Unusable(f"task_id: missing, cannot assign {attempt.trajectory_id!r} to a task")
    return attempt
