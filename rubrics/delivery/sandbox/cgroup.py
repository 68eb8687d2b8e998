"""A memory cap on a grading's whole process tree: a cgroup of its own, made per run and removed after.

RLIMIT_AS bounds each process, not their sum (six children of 200 MiB each hold 1.2 GiB), so where
this process may make cgroups (root, or a delegated cgroup v2 subtree) the sandbox runs inside one
whose memory limit is the grading's memory limit; what the tree writes to tmpfs (/tmp) is charged
to it too. cgroup v2 is used where its memory controller is enabled for our subtree, v1's memory
hierarchy otherwise. Where neither can be made (an unprivileged user without delegation) the cap is
the fallback of per-process RLIMIT_AS times the process limit, and `TreeCap.make` returns None.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

# The first program in the cgroup: moves itself in, then becomes the sandbox command (argv[2:]).
ENTER = ("import os, sys; f = open(sys.argv[1], 'w'); f.write(str(os.getpid())); f.close(); "
         "os.execv(sys.argv[2], sys.argv[2:])")


class TreeCap:
    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.version = version

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    @classmethod
    def make(cls, memory_bytes: int, root: Path = CGROUP_ROOT) -> TreeCap | None:
        """A fresh cgroup capped at memory_bytes (swap included where the kernel counts it), or None."""
        for version, parent in _parents(root):
            path = parent / f"rubric-grade-{os.getpid()}-{uuid.uuid4().hex[:10]}"
            try:
                path.mkdir()
            except OSError:
                continue
            cap = cls(path, version)
            try:
                if version == 2:
                    (path / "memory.max").write_text(str(memory_bytes))
                    if (path / "memory.swap.max").exists():
                        (path / "memory.swap.max").write_text("0")
                else:
                    (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    if (path / "memory.memsw.limit_in_bytes").exists():
                        (path / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            except OSError:
                cap.close()
                continue
            return cap
        return None

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the tree for going over the cap."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            lines = (self.path / name).read_text().splitlines()
        except OSError:
            return False
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value) > 0
        return False

    def close(self) -> None:
        """Kill whatever is left in the cgroup and remove it."""
        for _ in range(50):
            pids = self._pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []


def available(root: Path = CGROUP_ROOT) -> bool:
    """Whether a capped cgroup can be made here (one is made and removed to find out)."""
    cap = TreeCap.make(64 * 2**20, root)
    if cap is None:
        return False
    cap.close()
    return True


def _own_path(version: int) -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        num, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if version == 2 and num == "0" and controllers == "":
            return path
        if version == 1 and "memory" in controllers.split(","):
            return path
    return None


def _parents(root: Path) -> list[tuple[int, Path]]:
    """Where a child cgroup with a memory limit may be made, best first."""
    found: list[tuple[int, Path]] = []
    v2_root = root if (root / "cgroup.controllers").exists() else None
    if v2_root is not None:
        own = _own_path(2)
        for parent in dict.fromkeys([v2_root / own.lstrip("/") if own else None, v2_root]):
            if parent is None:
                continue
            try:
                enabled = (parent / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "memory" in enabled:
                found.append((2, parent))
    v1_root = root / "memory"
    if (v1_root / "memory.limit_in_bytes").exists() or (v1_root / "cgroup.procs").exists():
        own = _own_path(1)
        for parent in dict.fromkeys([v1_root / own.lstrip("/") if own else None, v1_root]):
            if parent is not None and parent.is_dir():
                found.append((1, parent))
    return found
