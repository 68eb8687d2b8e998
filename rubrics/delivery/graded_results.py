"""Read `rubric grade --format jsonl` output: one Result per line, the fields calibration needs.

A reference run (the task's solution.patch applied, or a reviewer's gold trajectory) is marked by its
trajectory id: it is `reference` or ends with `reference` after one of `/ : # . _ -`, for example
`task-0417/reference` or `task-0417:reference`. Reference runs are not attempts: they prove the task
solvable, and one that fails marks the task flaky or broken.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_REFERENCE_ID = re.compile(r"(?:^|[/:#._-])reference$", re.IGNORECASE)


class GradedAttempt(BaseModel):
    # A Result carries much more (items, earned, total); calibration needs only these.
    model_config = ConfigDict(extra="ignore")

    trajectory_id: str = Field(min_length=1)
    task_id: str | None = None
    score: float = Field(ge=0, le=1)
    complete: bool = True

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
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{shown}:{number}: invalid JSON: {exc.msg}")
                continue
            if isinstance(data, dict) and "score" not in data and "error" in data:
                problems.append(f"{shown}:{number}: not graded: {data['error']}")
                continue
            try:
                attempt = GradedAttempt.model_validate(data)
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "(line)"
                problems.append(f"{shown}:{number}: {field}: {first['msg']}")
                continue
            if attempt.task_id is None:
                problems.append(f"{shown}:{number}: task_id: missing, cannot assign {attempt.trajectory_id!r} to a task")
                continue
            attempts.append(attempt)
    return ResultsFile(attempts, problems)
