"""pass_rates.json (`rubric pass-rates`; calibration.json before): per-task attempt statistics, the keep/drop/inspect
label and flags."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Label = Literal["keep", "drop", "inspect"]
FlagCode = Literal["flaky-regrade", "reference-fails", "too-few-attempts", "incomplete-results", "no-results"]
FLAKY_CODES = ("flaky-regrade", "reference-fails")


class Flag(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: FlagCode
    message: str


class TaskPassRate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    category: str | None = Field(description="metadata.category; null when task.yaml is unreadable.")
    attempts: int = Field(ge=0, description="Distinct graded, complete, non-reference attempts.")
    successes: int = Field(ge=0, description="Attempts whose score >= pass_threshold.")
    pass_rate: float | None = Field(ge=0, le=1, description="successes / attempts; null without attempts.")
    score_mean: float | None = Field(ge=0, le=1)
    score_std: float | None = Field(ge=0, description="Population standard deviation of the scores.")
    score_min: float | None = Field(ge=0, le=1)
    score_max: float | None = Field(ge=0, le=1)
    pass_at_1: float | None = Field(ge=0, le=1)
    pass_at_k: float | None = Field(ge=0, le=1, description="Null when attempts < k.")
    pass_hat_k: float | None = Field(ge=0, le=1, description="pass^k; null when attempts < k.")
    reference: Literal["passed", "failed", "absent"]
    label: Label = Field(description="inspect at 0% (too hard or broken), drop at 100% (nothing to learn), keep between.")
    flaky: bool = Field(description="Graded differently on a regrade, or its reference solution fails.")
    flags: list[Flag]


class LabelCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keep: int = Field(ge=0)
    drop: int = Field(ge=0)
    inspect: int = Field(ge=0)
    flaky: int = Field(ge=0)
    too_few_attempts: int = Field(ge=0)


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graders: list[str] = Field(description="What produced the scores: rubric tasks run with its sandbox settings, "
                                           "or rubric grade.")
    judges: list[str] = Field(description="Judge models named by the result lines (rubric-graded tasks).")
    rubrics: list[str] = Field(description="Rubric ids named by the result lines.")
    grade_scripts: int = Field(ge=0, description="Distinct grade.sh digests among tasks run lines.")


class PassRates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    results_file: str = Field(description="File name of the graded results (no directory, so output is portable).")
    attempts_requested: int = Field(ge=1)
    k: int = Field(ge=1)
    pass_threshold: float = Field(ge=0, le=1)
    summary: LabelCounts
    tasks: list[TaskPassRate]
    unknown_tasks: list[str] = Field(description="task_ids in the results that are not in the delivery.")
    problems: list[str] = Field(description="file:line: message, for result lines that were skipped.")
    provenance: Provenance
