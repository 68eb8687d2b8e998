"""task.yaml: what the model is shown (instruction, repo at a commit, tools, step budget) and metadata it never sees."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rubrics.rubric.problems import Problem
from rubrics.rubric.source_map import parse_yaml

TASK_FILE = "task.yaml"


class TaskMetadata(BaseModel):
    """Seen by the vendor, the lab and the report; never by the model under training."""

    # Vendors keep their own bookkeeping here (ticket, author, source); unknown keys are kept.
    model_config = ConfigDict(extra="allow")

    category: str = Field(min_length=1, description="Kind of work, e.g. 'numeric bugs'; the report groups by it.")
    difficulty: Literal["easy", "medium", "hard"]
    group: str | None = Field(
        None,
        min_length=1,
        description="Tasks sharing a group (same repo, same bug family) always land on the same side of the held-out split.",
    )
    reviewers: list[str] = Field(default_factory=list, description="Who reviewed the task (names or handles).")


class TaskSpec(BaseModel):
    """The contents of one task.yaml."""

    model_config = ConfigDict(extra="forbid", title="Task")

    id: str | None = Field(None, description="Defaults to the folder name; when given it must equal it.")
    instruction: str = Field(min_length=1, description="What the model is asked to do.")
    repo: str = Field(min_length=1, description="Repository the Dockerfile checks out.")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="Pinned commit (7 to 40 lowercase hex digits).")
    tools: list[str] = Field(min_length=1, description="Tool names the model may call; each must be in tools.json.")
    max_steps: int = Field(ge=1, description="Step budget of one attempt.")
    rubric: str | None = Field(
        None,
        description="Relative path of a rubric file: the task is graded by that rubric instead of tests/ and solution.patch.",
    )
    metadata: TaskMetadata


def load_task_spec(path: Path, shown_as: str) -> tuple[TaskSpec | None, list[Problem]]:
    """Parse and validate one task.yaml; every problem names `shown_as:line:col` and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem.about(shown_as, f"cannot read: {exc}", "task-unreadable")]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = getattr(exc, "problem", None) or str(exc)
        return None, [Problem.about(shown_as, f"invalid YAML: {reason}", "task-yaml", line=line, col=col)]
    if not isinstance(data, dict):
        return None, [Problem.about(shown_as, "must be a mapping of fields", "task-schema", line=1, col=1)]
    try:
        return TaskSpec.model_validate(data), []
    except ValidationError as exc:
        _, where, _ = parse_yaml(text)   # pydantic says where a field is in the data; this, where it is in the file
        problems = []
        for err in exc.errors():
            field = ".".join(str(part) for part in err["loc"]) or "(document)"
            line, col = where.locate_loc(err["loc"]) if where.values else (1, 1)
            problems.append(Problem.about(shown_as, f"{field}: {err['msg']}", "task-schema", line=line, col=col))
        return None, problems
