"""report.json: the numbers behind report.md, for the lab's own tooling."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.pass_rates.records import Label, Provenance
from rubrics.delivery.tasks.layout import DeliveryFolder
from rubrics.delivery.split.heldout import TwinPair

Decision = Literal["keep", "removed", "inspect"]


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
    calibrated: int = Field(ge=0, description="Tasks with at least one graded attempt.")   # report.json's name
    pass_at_1: float | None = Field(ge=0, le=1, description="Mean pass@1 over the tasks with a graded attempt.")
    pass_at_1_shipped: float | None = Field(ge=0, le=1, description="Mean pass@1 over the tasks that ship (kept, not removed).")
    keep: int = Field(ge=0)
    drop: int = Field(ge=0)
    inspect: int = Field(ge=0)


class TaskRow(_Strict):
    task_id: str
    category: str
    difficulty: str
    side: Literal["tasks", "heldout"]
    attempts: int | None = Field(ge=0, description="Null when the delivery has no pass rates.")
    successes: int | None = Field(ge=0)
    pass_rate: float | None = Field(ge=0, le=1)
    pass_rate_low: float | None = Field(ge=0, le=1, description="95% Wilson interval of the pass rate, lower end.")
    pass_rate_high: float | None = Field(ge=0, le=1)
    pass_at_1: float | None = Field(ge=0, le=1)
    pass_at_k: float | None = Field(ge=0, le=1)
    pass_hat_k: float | None = Field(ge=0, le=1)
    label: Label | None = Field(description="The keep/drop/inspect label, from the pass rate alone.")
    decision: Decision = Field(description="Final: removed (any removal reason), inspect (never solved), else keep.")
    flags: list[str] = Field(description="Flag codes from the pass rates, 'check' for folder-check errors, 'invalid' "
                                         "for failed validation, 'manual' for a removal.yaml.")


class RemovedTask(_Strict):
    task_id: str
    reasons: list[str] = Field(min_length=1)


class PassRateSettings(_Strict):
    model_config = ConfigDict(extra="forbid", title="CalibrationSettings")   # its name in delivery_report.schema.json

    results_file: str
    attempts_requested: int = Field(ge=1)
    k: int = Field(ge=1)
    pass_threshold: float = Field(ge=0, le=1)


class SplitCounts(_Strict):
    all_tasks: int = Field(ge=0, description="Tasks of the category in the delivery.")
    training_shipped: int = Field(ge=0, description="Training side, not removed.")
    heldout_shipped: int = Field(ge=0, description="Held-out side, not removed.")
    removed: int = Field(ge=0, description="Removed tasks, excluded from both sides.")


class SplitSummary(_Strict):
    seed: int
    heldout_fraction: float = Field(ge=0, le=1)
    similarity_threshold: float = Field(gt=0, le=1)
    policy: str = Field(description="How removed tasks are treated: excluded from both sides of the split.")
    training_shipped: int = Field(ge=0)
    heldout_shipped: int = Field(ge=0)
    removed_training: list[str] = Field(description="Removed tasks the split had put on the training side.")
    removed_heldout: list[str] = Field(description="Removed tasks the split had put on the held-out side.")
    groups: int = Field(ge=0)
    multi_task_groups: int = Field(ge=0, description="Groups of two or more tasks, kept on one side.")
    near_duplicates: list[TwinPair]
    by_category: dict[str, SplitCounts]


class DeliveryReport(_Strict):
    model_config = ConfigDict(extra="forbid", title="DeliveryReport")

    version: Literal[1] = 1
    total_tasks: int = Field(ge=0)
    layout: DeliveryFolder = Field(description="Where the task folders are now (the split may propose moves).")
    category_mix: list[CategoryMix]
    baseline: list[CategoryBaseline] = Field(description="Per category, then 'all'; empty without pass rates.")
    calibration: PassRateSettings | None   # the pass rates' settings, under the key report.json has always had
    tasks: list[TaskRow]
    removed: list[RemovedTask] = Field(description="Tasks not to ship: already solved, flaky, failing the folder check "
                                                   "or validation, or removed by a person (removal.yaml).")
    to_inspect: list[RemovedTask] = Field(description="Never solved: too hard, or broken; a person decides.")
    split: SplitSummary | None
    chart: str | None = Field(description="File name of the pass-rate chart (SVG) beside report.md.")
    provenance: Provenance | None = Field(description="What produced the graded results; null without pass rates.")
    validated: bool = Field(description="Whether validation.json (rubric tasks validate) was read.")
