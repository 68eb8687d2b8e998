"""validation.json: per task, whether its reference solution and its untouched start behave as the tests say."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.runs.records import RunStatus


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunCheck(_Strict):
    status: RunStatus
    score: float = Field(ge=0, le=1)
    wrong: list[str] = Field(description="Tests whose outcome contradicts their kind, as 'test id: status'.")


class TaskValidation(_Strict):
    task_id: str
    verdict: Literal["valid", "invalid", "skipped"]
    reasons: list[str] = Field(description="Why invalid (naming the tests), or why skipped.")
    solution: RunCheck | None = Field(description="solution.patch applied: every test must pass.")
    start: RunCheck | None = Field(description="The untouched start: fail-to-pass must fail, pass-to-pass pass.")


class ValidationReport(_Strict):
    model_config = ConfigDict(extra="forbid", title="Validation")

    version: Literal[1] = 1
    runtime: str
    valid: int = Field(ge=0)
    invalid: int = Field(ge=0)
    skipped: int = Field(ge=0)
    tasks: list[TaskValidation]
