"""Where the task folders of a delivery are: DIR/tasks/* and DIR/heldout/*, a bare folder of tasks, or one task."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.tasks.task import TASK_FILE

TASKS_DIR = "tasks"
HELDOUT_DIR = "heldout"
REPORT_FILE = "report.md"

Side = Literal["tasks", "heldout"]


class TaskRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The folder name.")
    path: str = Field(description="Folder path relative to the delivery root, '/'-separated.")
    side: Side = Field(description="'heldout' for folders under heldout/ (eval only), else 'tasks'.")


class DeliveryFolder(BaseModel):
    """A delivery as shipped: tasks/ for training, heldout/ for evaluation only, and report.md beside them.

    report.md is not listed: `rubric report` writes it, and a listing that changed with its presence
    would make the report differ between a first and a second run.
    """

    model_config = ConfigDict(extra="forbid", title="DeliveryFolder")

    tasks: list[TaskRef] = Field(default_factory=list, description="Folders under tasks/ (or DIR/*, or DIR itself).")
    heldout: list[TaskRef] = Field(default_factory=list, description="Folders under heldout/.")

    def all_tasks(self) -> list[TaskRef]:
        return self.tasks + self.heldout


def discover(root: Path) -> DeliveryFolder:
    """Every task folder under `root`, sorted by id within each side.

    A directory counts as a task folder by position, not by content, so that a folder that lost its
    task.yaml is reported as broken instead of silently skipped. Hidden directories are ignored.
    """
    if (root / TASK_FILE).is_file():
        return DeliveryFolder(tasks=[TaskRef(id=root.resolve().name, path=".", side="tasks")])
    if not ((root / TASKS_DIR).is_dir() or (root / HELDOUT_DIR).is_dir()):
        return DeliveryFolder(tasks=_children(root, "", "tasks"))
    return DeliveryFolder(
        tasks=_children(root / TASKS_DIR, TASKS_DIR + "/", "tasks"),
        heldout=_children(root / HELDOUT_DIR, HELDOUT_DIR + "/", "heldout"),
    )


def _children(folder: Path, prefix: str, side: Side) -> list[TaskRef]:
    if not folder.is_dir():
        return []
    names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return [TaskRef(id=name, path=prefix + name, side=side) for name in names]
