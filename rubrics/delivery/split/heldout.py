"""The held-out split: whole groups go to heldout/ until the requested share is reached, chosen by a seed.

Reproducible: groups are ordered by id, shuffled with `random.Random(seed)` and taken greedily while
they fit in round(fraction * tasks), first without taking any category past round(fraction * its
tasks), then without that limit; the same tasks, fraction, seed and threshold give the same
split.json byte for byte. A group never straddles the split, so neither does a near-twin pair.
"""
from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.split.grouping import SplitGroup, build_groups
from rubrics.delivery.tasks.layout import HELDOUT_DIR, TASKS_DIR, DeliveryFolder
from rubrics.delivery.split.near_duplicates import DEFAULT_THRESHOLD, SHINGLE_SIZE
from rubrics.delivery.tasks.task import TaskSpec

SPLIT_FILE = "split.json"


class TwinPair(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a: str
    b: str
    jaccard: float = Field(ge=0, le=1)


class AssignedGroup(SplitGroup):
    side: Literal["tasks", "heldout"]


class CategoryCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: int = Field(ge=0)
    heldout: int = Field(ge=0)


class SplitPlan(BaseModel):
    """split.json: which task goes to training (tasks/) and which to evaluation only (heldout/), and why."""

    model_config = ConfigDict(extra="forbid", title="SplitPlan")

    version: Literal[1] = 1
    seed: int
    heldout_fraction: float = Field(ge=0, le=1)
    similarity_threshold: float = Field(gt=0, le=1)
    shingle_size: int = Field(ge=1)
    target_heldout: int = Field(ge=0, description="round(heldout_fraction * number of tasks).")
    tasks: list[str] = Field(description="Task ids for training, sorted.")
    heldout: list[str] = Field(description="Task ids for evaluation only, sorted.")
    by_category: dict[str, CategoryCounts]
    groups: list[AssignedGroup]
    near_duplicates: list[TwinPair]


def plan_split(
    specs: dict[str, TaskSpec], heldout_fraction: float, seed: int, threshold: float = DEFAULT_THRESHOLD
) -> SplitPlan:
    if not 0.0 <= heldout_fraction <= 1.0:
        raise ValueError(f"--heldout must be in [0, 1], got {heldout_fraction}")
    groups, twins = build_groups(specs, threshold)
    target = round(heldout_fraction * len(specs))
    order = list(groups)
    random.Random(seed).shuffle(order)
    chosen = _choose(order, specs, heldout_fraction, target)
    assigned = [AssignedGroup(**g.model_dump(), side="heldout" if g.id in chosen else "tasks") for g in groups]
    heldout = sorted(t for g in assigned if g.side == "heldout" for t in g.tasks)
    train = sorted(t for g in assigned if g.side == "tasks" for t in g.tasks)
    return SplitPlan(
        seed=seed,
        heldout_fraction=heldout_fraction,
        similarity_threshold=threshold,
        shingle_size=SHINGLE_SIZE,
        target_heldout=target,
        tasks=train,
        heldout=heldout,
        by_category=_by_category(specs, set(heldout)),
        groups=assigned,
        near_duplicates=[TwinPair(a=p.a, b=p.b, jaccard=p.jaccard) for p in twins],
    )


def _choose(order: list[SplitGroup], specs: dict[str, TaskSpec], fraction: float, target: int) -> set[str]:
    """Greedy in shuffled order; a first pass also keeps each category near its share, so that a small
    category is not emptied into heldout/; a second pass fills up to the total target."""
    total = Counter(spec.metadata.category for spec in specs.values())
    caps = {c: round(fraction * n) for c, n in total.items()}
    held: Counter = Counter()
    chosen: set[str] = set()
    taken = 0
    for respect_caps in (True, False):
        for group in order:
            if group.id in chosen or taken + len(group.tasks) > target:
                continue
            need = Counter(specs[t].metadata.category for t in group.tasks)
            if respect_caps and any(held[c] + n > caps[c] for c, n in need.items()):
                continue
            chosen.add(group.id)
            taken += len(group.tasks)
            held.update(need)
    return chosen


def _by_category(specs: dict[str, TaskSpec], heldout: set[str]) -> dict[str, CategoryCounts]:
    held = Counter(specs[t].metadata.category for t in heldout)
    total = Counter(spec.metadata.category for spec in specs.values())
    return {c: CategoryCounts(tasks=total[c] - held[c], heldout=held[c]) for c in sorted(total)}


def write_plan(plan: SplitPlan, path: Path) -> None:
    path.write_text(plan.model_dump_json(indent=2) + "\n", encoding="utf-8")


def read_plan(path: Path) -> SplitPlan:
    return SplitPlan.model_validate_json(path.read_text(encoding="utf-8"))


def materialize(plan: SplitPlan, root: Path, delivery: DeliveryFolder, out: Path) -> None:
    """Copy every task folder into out/tasks/ or out/heldout/ as the plan says; the input is never touched.

    Refuses a non-empty `out` so that an earlier split cannot mix with this one.
    """
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out}: exists and is not empty; choose a new folder")
    if out.resolve().is_relative_to(root.resolve()):
        # Copying a folder into itself would recurse; and writing into the input is what we promise not to do.
        raise ValueError(f"{out}: must lie outside the delivery {root}")
    sources = {ref.id: root / ref.path for ref in delivery.all_tasks()}
    heldout = set(plan.heldout)
    for task_id in plan.tasks + plan.heldout:
        side = HELDOUT_DIR if task_id in heldout else TASKS_DIR
        # copy2 keeps modes, so grade.sh stays executable.
        shutil.copytree(sources[task_id], out / side / task_id, symlinks=True)
    write_plan(plan, out / SPLIT_FILE)
