"""Where a batch of attempts is: ATTEMPTS/<task-id>/<name>.patch (a diff against the task's starting
state) or ATTEMPTS/<task-id>/<name>/ (the whole workspace as the attempt left it)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

AttemptKind = Literal["patch", "snapshot"]
PATCH_SUFFIX = ".patch"


@dataclass(frozen=True)
class AttemptRef:
    task_id: str
    name: str
    kind: AttemptKind
    path: Path

    @property
    def trajectory_id(self) -> str:
        return f"{self.task_id}/{self.name}"


@dataclass
class AttemptListing:
    attempts: list[AttemptRef]
    problems: list[str]      # "path: message" for entries that are not attempts


def discover_attempts(root: Path, task_ids: set[str]) -> AttemptListing:
    """Attempts of the known tasks, sorted by task then name; anything else is a problem, never fatal."""
    attempts: list[AttemptRef] = []
    problems: list[str] = []
    for task_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if task_dir.name not in task_ids:
            problems.append(f"{task_dir}: no task {task_dir.name!r} in the delivery")
            continue
        for entry in sorted(task_dir.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                problems.append(f"{entry}: a symbolic link, not an attempt (use a folder or a .patch file)")
            elif entry.is_dir():
                attempts.append(AttemptRef(task_dir.name, entry.name, "snapshot", entry))
            elif entry.is_file() and entry.name.endswith(PATCH_SUFFIX):
                attempts.append(AttemptRef(task_dir.name, entry.name[: -len(PATCH_SUFFIX)], "patch", entry))
            else:
                problems.append(f"{entry}: neither a workspace folder nor a {PATCH_SUFFIX} file")
    return AttemptListing(attempts, problems)
