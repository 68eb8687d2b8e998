"""The result of grading one trajectory against one rubric."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.judges.protocol import MemberVerdict
from rubrics.judges.usage import JudgeUsage


Fraction = Annotated[float, Field(ge=0.0, le=1.0)]   # a score-like number in [0, 1]
OnError = Literal["raise", "nan", "zero"]


class IncompleteResultError(ValueError):
    """A reward was asked of a result that has none (an item could not be evaluated, or the trajectory did not
    load)."""

    def __init__(self, result: "Result"):
        errors = "; ".join(result.errors[:3]) + (f"; and {len(result.errors) - 3} more" if len(result.errors) > 3 else "")
        super().__init__(f"trajectory {result.trajectory_id!r} has no reward: its result is incomplete ({errors})")
        self.result = result


class TagScore(BaseModel):
    """The criteria that carry one tag, scored on their own (gates do not enter tag scores)."""
    model_config = ConfigDict(frozen=True)
    earned: int = Field(description="Sum of the points of the tag's met criteria (may be negative).")
    total: int = Field(description="Sum of the positive points of the tag's criteria.")
    score: Fraction | None = Field(description="max(0, earned) / total; null when total is 0 (only penalties).")
    complete: bool = Field(description="False when one of the tag's items could not be evaluated.")


class GroupPlace(BaseModel):
    """Where group grading (rubrics.score_group) ranked one attempt on one judge item, among the attempts of its
    task that the judge could judge on it."""
    model_config = ConfigDict(frozen=True)
    attempts: int = Field(ge=2, description="Attempts ranked on this item (the others were decided without the "
                                            "judge: no evidence, a missing fact, or an error).")
    rank: int = Field(ge=1, description="1 for the attempt the comparisons put first.")
    compared_with: int = Field(ge=0, description="Other attempts this one was compared with, side by side in both "
                                                 "orders.")
    strength: float = Field(description="Its Bradley-Terry strength on the logit scale (pointwise logit as prior).")
    alone: Fraction = Field(description="The judge's probability for this attempt judged alone; the item's "
                                        "probability is the group's (the group's probabilities handed out by rank).")

    def describe(self) -> str:
        return (f"side by side with {self.compared_with} of the other {self.attempts - 1} attempts: ranked "
                f"{self.rank} of {self.attempts} (alone {self.alone:.3f})")


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
    uncertain: bool = Field(False, description="Judge items: the probability lies in the item's uncertain band "
                                               "(default 0.35-0.65, inclusive), so the verdict is close to a coin; "
                                               "score_low and score_high let it fall either way.")
    members: list[MemberVerdict] | None = Field(None, description="Judge items graded by a panel: each member's "
                                                                  "verdict (the item's probability combines them).")
    tags: list[str] = Field(default_factory=list, description="The item's tags, as the rubric gives them.")
    facts_missing: list[str] | None = Field(None, description="Judge items decided without the judge: the facts "
                                                              "(judge: facts) not found in the item's evidence.")
    judge_detail: str | None = Field(None, description="Judge items: the numbers the method's verdict rests on "
                                                        "(a verdict head's logit, a likelihood's nats per token).")
    group: GroupPlace | None = Field(None, description="Judge items graded in a group of attempts: this attempt's "
                                                       "place among them (null when graded alone).")


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
    expected_score: Fraction | None = Field(
        None, description="E[score] when each judge item is met with its probability (gates included), items independent; "
                    "code checks, and judge verdicts without a probability, count at their status. Null when the "
                    "result is incomplete (an item is error or the trajectory did not load): never a partial "
                    "number that looks complete.")
    score_low: Fraction | None = Field(
        None, description="Lowest score over every way the uncertain items could fall, the other items at their status. "
                    "score_low <= score <= score_high always; expected_score lies in the range when every judge "
                    "item outside the band has probability 0 or 1 (so always with the band [0, 1]), not in general. "
                    "Null when the result is incomplete.")
    score_high: Fraction | None = Field(
        None, description="Highest score over every way the uncertain items could fall (see score_low). Null when the "
                    "result is incomplete.")
    uncertain_items: int = Field(0, ge=0, description="Number of items flagged uncertain.")
    judge_usage: JudgeUsage | None = Field(
        None, description="The judge's work for this trajectory's items: prompt, cached and completion tokens, and "
                          "verdicts served by the verdict cache. Null when no judge item was graded or the judge "
                          "reports no usage.")
    tags: dict[str, TagScore] = Field(
        default_factory=dict, description="Per tag of the rubric's items (sorted by tag): the score of the criteria "
                                          "that carry it. Empty when no item has tags.")
    reward: Fraction | None = Field(
        None, description="The number a trainer takes: score (reward hard, the default) or expected_score (reward "
                    "expected). Null when the result is incomplete (an item is error or the trajectory did not load): "
                    "a partial score never passes for a reward.")

    def get_reward(self, on_error: OnError = "raise") -> float:
        """The reward as a float for a trainer. An incomplete result has none: on_error="raise" (the default)
        raises IncompleteResultError naming the trajectory and its errors, "nan" returns NaN (for trainers that
        mask NaN rewards), "zero" returns 0.0 (only when a failed rollout should count as a failed task)."""
        if self.reward is not None:
            return self.reward
        if on_error == "nan":
            return float("nan")
        if on_error == "zero":
            return 0.0
        if on_error != "raise":
            raise ValueError(f"on_error: expected 'raise', 'nan' or 'zero', got {on_error!r}")
        raise IncompleteResultError(self)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
