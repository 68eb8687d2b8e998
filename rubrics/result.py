"""The result of grading one trajectory against one rubric."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ItemResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    kind: Literal["gate", "criterion"]
    text: str | None = None
    points: int | None = None
    status: Literal["met", "unmet", "error"]
    method: Literal["code", "judge"]
    evidence: str = Field(description="What was found, or what was missing.")
    probability: float | None = Field(None, description="Judge items: the judge's probability that the item is met.")
    error: str | None = Field(None, description="Why the item could not be evaluated (status error).")


class Result(BaseModel):
    model_config = ConfigDict(frozen=True)
    trajectory_id: str
    task_id: str | None = None
    rubric_id: str
    score: float = Field(ge=0.0, le=1.0, description="0 when a gate fails, else max(0, earned) / total.")
    gates_passed: bool | None = Field(description="False if a gate is unmet; null if none is unmet but one errored.")
    earned: int = Field(description="Sum of the points of met criteria (may be negative).")
    total: int = Field(description="Sum of the positive points.")
    complete: bool = Field(description="False when some item could not be evaluated: the score is then a partial one.")
    items: list[ItemResult]
    errors: list[str] = Field(default_factory=list)
    judge: str | None = Field(None, description="Name of the judge used, null when no judge item was graded.")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
