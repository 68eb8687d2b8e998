"""The parsed task.yaml of every task folder in a delivery, for commands that need instructions or categories."""
from __future__ import annotations

from pathlib import Path

from rubrics.delivery.tasks.layout import DeliveryFolder, discover
from rubrics.rubric.problems import Problem
from rubrics.delivery.tasks.task import TASK_FILE, TaskSpec, load_task_spec


def load_catalog(root: Path) -> tuple[DeliveryFolder, dict[str, TaskSpec], list[Problem]]:
    """Specs by task id; a folder whose task.yaml is missing or invalid is left out and reported."""
    delivery = discover(root)
    specs: dict[str, TaskSpec] = {}
    problems: list[Problem] = []
    for ref in delivery.all_tasks():
        path = root / ref.path / TASK_FILE
        shown = str(root / ref.path / TASK_FILE) if ref.path != "." else str(root / TASK_FILE)
        if not path.is_file():
            problems.append(Problem.about(shown, "missing", "missing-file"))
            continue
        spec, found = load_task_spec(path, shown)
        problems.extend(found)
        if spec is not None:
            if ref.id in specs:
                problems.append(Problem.about(shown, f"task id {ref.id!r} appears twice", "duplicate-id"))
            specs[ref.id] = spec
    if not delivery.all_tasks():
        problems.append(Problem.about(str(root), "no task folders found (expected tasks/*/, heldout/*/ or */)", "no-tasks"))
    return delivery, specs, problems
