"""How much one grading run may use: wall time, memory, processes, file size, disk, log kept."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 300.0           # the whole grade.sh run, from sandbox start to the last process killed
    memory_mb: int = 2048           # address space of each process (RLIMIT_AS), and of the whole process tree
                                    # (a cgroup where one can be made), or the container's memory
    processes: int = 256            # processes of the sandbox user at once (RLIMIT_NPROC), or the pids limit
    file_mb: int = 256              # largest file any process may write (RLIMIT_FSIZE)
    tmp_mb: int = 256               # size of the fresh /tmp (a tmpfs)
    disk_mb: int = 768              # what the workspace, the sealed tests and /report may hold together
    log_bytes: int = 4000           # tail of grade.sh's output kept in the result line

    def __post_init__(self) -> None:
        for name in ("wall_s", "memory_mb", "processes", "file_mb", "tmp_mb", "disk_mb", "log_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox limit {name} must be positive, got {getattr(self, name)}")
