"""Split groups: tasks joined by a shared `metadata.group` label or by near-twin instructions."""
from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.split.near_duplicates import DEFAULT_THRESHOLD, NearDuplicate, near_duplicates
from rubrics.delivery.tasks.task import TaskSpec
from rubrics.delivery.split.union_find import UnionFind


class SplitGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The group's smallest task id.")
    tasks: list[str]
    labels: list[str] = Field(description="metadata.group labels of its tasks.")
    near_twins: int = Field(description="Near-twin pairs inside the group.")


def build_groups(
    specs: dict[str, TaskSpec], threshold: float = DEFAULT_THRESHOLD
) -> tuple[list[SplitGroup], list[NearDuplicate]]:
    """Connected components of 'same label' and 'near twin'; a task without a label may stand alone."""
    twins = near_duplicates({task_id: spec.instruction for task_id, spec in specs.items()}, threshold)
    sets = UnionFind(sorted(specs))
    by_label: dict[str, list[str]] = defaultdict(list)
    for task_id, spec in sorted(specs.items()):
        if spec.metadata.group is not None:
            by_label[spec.metadata.group].append(task_id)
    for members in by_label.values():
        for other in members[1:]:
            sets.union(members[0], other)
    for pair in twins:
        sets.union(pair.a, pair.b)
    groups = []
    for members in sets.components():
        inside = set(members)
        labels = sorted({specs[t].metadata.group for t in members if specs[t].metadata.group is not None})
        pairs = sum(1 for p in twins if p.a in inside)
        groups.append(SplitGroup(id=members[0], tasks=members, labels=labels, near_twins=pairs))
    return groups, twins
