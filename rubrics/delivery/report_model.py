"""report.json: the numbers behind report.md, for the lab's own tooling."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.calibration_model import Label
from rubrics.delivery.layout import DeliveryFolder
from rubrics.delivery.split import CategoryCounts, TwinPair


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CategoryMix(_Strict):
    category: str
    tasks: int = Field(ge=0)
    share: float = Field(ge=0, le=1)
    easy: int = Field(ge=0)
    medium: int = Field(ge=0)
    hard: int = Field(ge=0)


class CategoryBaseline(_Strict):
    category: str = Field(description="A category, or 'all'.")
    calibrated: int = Field(ge=0, description="Tasks with at least one graded attempt.")
    pass_at_1: float | None = Field(ge=0, le=1, description="Mean pass@1 over calibrated tasks.")
    pass_at_1_shipped: float | None = Field(ge=0, le=1, description="Mean pass@1 over the tasks that ship (kept, not removed).")
    keep: int = Field(ge=0)
    drop: int = Field(ge=0)
    inspect: int = Field(ge=0)


class TaskRow(_Strict):
    task_id: str
    category: str
    difficulty: str
    side: Literal["tasks", "heldout"]
    attempts: int | None = Field(ge=0, description="Null when the delivery has no calibration.")
    successes: int | None = Field(ge=0)
    pass_rate: float | None = Field(ge=0, le=1)
    pass_at_1: float | None = Field(ge=0, le=1)
    pass_at_k: float | None = Field(ge=0, le=1)
    pass_hat_k: float | None = Field(ge=0, le=1)
    label: Label | None
    flags: list[str] = Field(description="Flag codes from calibration, and 'check' for folder-check errors.")


class RemovedTask(_Strict):
    task_id: str
    reasons: list[str] = Field(min_length=1)


class CalibrationSettings(_Strict):
    results_file: str
    attempts_requested: int = Field(ge=1)
    k: int = Field(ge=1)
    pass_threshold: float = Field(ge=0, le=1)


class SplitSummary(_Strict):
    seed: int
    heldout_fraction: float = Field(ge=0, le=1)
    similarity_threshold: float = Field(gt=0, le=1)
    tasks: int = Field(ge=0)
    heldout: int = Field(ge=0)
    groups: int = Field(ge=0)
    multi_task_groups: int = Field(ge=0, description="Groups of two or more tasks, kept on one side.")
    near_duplicates: list[TwinPair]
    by_category: dict[str, CategoryCounts]


class DeliveryReport(_Strict):
    model_config = ConfigDict(extra="forbid", title="DeliveryReport")

    version: Literal[1] = 1
    total_tasks: int = Field(ge=0)
    layout: DeliveryFolder = Field(description="Where the task folders are now (the split may propose moves).")
    category_mix: list[CategoryMix]
    baseline: list[CategoryBaseline] = Field(description="Per category, then 'all'; empty without calibration.")
    calibration: CalibrationSettings | None
    tasks: list[TaskRow]
    removed: list[RemovedTask] = Field(description="Tasks not to ship: already solved, flaky, or failing the folder check.")
    to_inspect: list[RemovedTask] = Field(description="Never solved: too hard, or broken; a person decides.")
    split: SplitSummary | None
    chart: str | None = Field(description="File name of the pass-rate chart (SVG) beside report.md.")
