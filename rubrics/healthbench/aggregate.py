"""HealthBench's figures over graded results, as simple-evals' healthbench_eval.py computes them:

- per example: earned / total, unclipped (earned sums the points of met criteria, penalties included; total sums
  the positive points); gates do not enter (HealthBench rubrics have none);
- per rubric-item tag, per example: the same over the criteria with that tag, when they have positive points;
  per example tag (the trajectory's metadata.example_tags): the example's overall value;
- each figure: the mean over the examples that have it, clipped to [0, 1]; n_samples; bootstrap_std = the
  population standard deviation of the clipped means of 1000 resamples with replacement.

simple-evals draws the resamples from numpy's unseeded global generator; here they come from random.Random(seed)
so that the same results always give the same figures. Incomplete results (an item not evaluated, a trajectory
that did not load) are left out and counted, never scored as 0.
"""
from __future__ import annotations

import random
import statistics
from collections import defaultdict
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field

BOOTSTRAP_SAMPLES = 1000
SEED = 0


class Figure(BaseModel):
    model_config = ConfigDict(frozen=True)
    mean: float = Field(description="Mean over the examples, clipped to [0, 1].")
    bootstrap_std: float = Field(description="Std of the clipped means of 1000 resamples with replacement.")
    n_samples: int


class ExampleScore(BaseModel):
    model_config = ConfigDict(frozen=True)
    trajectory_id: str
    earned: int
    total: int
    score: float = Field(description="earned / total, unclipped (negative when penalties outweigh).")


class Aggregate(BaseModel):
    model_config = ConfigDict(frozen=True)
    overall: Figure | None = Field(description="Null when no result could be counted.")
    tags: dict[str, Figure] = Field(description="Per tag, sorted: rubric-item tags and example tags.")
    examples: list[ExampleScore]
    excluded: list[str] = Field(description="Trajectories left out: incomplete, or a rubric without positive points.")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def clipped_mean(values: Sequence[float]) -> float:
    return min(1.0, max(0.0, sum(values) / len(values)))


def figure(values: Sequence[float], rng: random.Random) -> Figure:
    means = [clipped_mean(rng.choices(values, k=len(values))) for _ in range(BOOTSTRAP_SAMPLES)]
    return Figure(mean=clipped_mean(values), bootstrap_std=statistics.pstdev(means), n_samples=len(values))


def example_tags(trajectory: Any) -> list[str]:
    tags = getattr(trajectory, "metadata", {}).get("example_tags") if trajectory is not None else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def aggregate_results(results: Sequence, trajectories: Sequence, seed: int = SEED) -> Aggregate:
    """`trajectories[i]` is the trajectory of `results[i]` (or a LoadFailure, or None): its example tags."""
    examples, excluded = [], []
    per_tag: dict[str, list[float]] = defaultdict(list)
    for result, trajectory in zip(results, trajectories, strict=True):
        if not result.complete or result.total <= 0:
            excluded.append(result.trajectory_id)
            continue
        overall = result.earned / result.total
        examples.append(ExampleScore(trajectory_id=result.trajectory_id, earned=result.earned, total=result.total,
                                     score=overall))
        values = {tag: overall for tag in example_tags(trajectory)}
        values.update({tag: s.earned / s.total for tag, s in result.tags.items() if s.total > 0})
        for tag, value in values.items():
            per_tag[tag].append(value)
    rng = random.Random(seed)
    overall = figure([e.score for e in examples], rng) if examples else None
    return Aggregate(overall=overall, tags={tag: figure(per_tag[tag], rng) for tag in sorted(per_tag)},
                     examples=examples, excluded=excluded)
