"""What a grading run sees and what comes back, whichever runtime (bubblewrap or Docker) runs it.

Inside the sandbox: /repo is the attempt's workspace (the only writable place that outlives the
run besides /report), /sealed/tests the hidden tests (read-only), /task the task folder (read-only,
solution.patch hidden), /report an empty folder for the grader's JUnit XML, /tmp fresh and empty.
grade.sh runs with /repo as its working directory and REPORT_DIR, SEALED_TESTS and TASK_DIR set.
PYTHONSAFEPATH keeps the working directory off sys.path, so that `python -m pytest` run from /repo finds
the image's pytest, never a /repo/pytest.py the attempt planted (grade.sh should still say `python -I`:
an image's Python older than 3.11 ignores PYTHONSAFEPATH).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from rubrics.delivery.sandbox.limits import SandboxLimits

if TYPE_CHECKING:
    from rubrics.delivery.sandbox.result_channel import ChannelLog

Runtime = Literal["bwrap", "docker"]

REPO = "/repo"
SEALED_TESTS = "/sealed/tests"
TASK = "/task"
REPORT = "/report"
GRADER = "grade.sh"


@dataclass(frozen=True)
class SandboxRequest:
    task_id: str
    task_dir: Path          # the task folder, mounted read-only at /task
    workspace: Path         # the attempt's workspace, mounted read-write at /repo
    sealed_tests: Path      # the hidden tests, mounted read-only at /sealed/tests
    report_dir: Path        # empty; mounted read-write at /report
    slot: int               # which of the --jobs concurrent runs this is; picks the sandbox uid


@dataclass(frozen=True)
class SandboxOutcome:
    exit_code: int | None           # grade.sh's exit status; None when it never finished
    timed_out: bool
    wall_s: float
    log_tail: str
    left_processes: int | None      # processes still alive when grade.sh exited (all then killed)
    sandbox_error: str | None       # the sandbox itself failed: the attempt was not graded
    memory_killed: bool = False     # the kernel killed a process for the process tree's memory cap
    summaries: tuple[dict[str, int], ...] = ()   # pytest's summary lines in the output, as {"failed": 2, ...}
    channel: ChannelLog | None = None   # what the harness's pytest plugin sent; None where the runtime has none


class Sandbox(Protocol):
    runtime: Runtime

    def run(self, request: SandboxRequest, limits: SandboxLimits) -> SandboxOutcome: ...


class SandboxUnavailable(RuntimeError):
    """The runtime cannot run here (bwrap missing, no Docker daemon); the message says what to do."""


def environment() -> dict[str, str]:
    return {"REPORT_DIR": REPORT, "SEALED_TESTS": SEALED_TESTS, "TASK_DIR": TASK, "HOME": "/tmp",
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}


def parse_status(line: str | None) -> tuple[int | None, int | None]:
    """The trampoline's 'exit_code left_processes' line; (None, None) when it never wrote one."""
    if not line:
        return None, None
    parts = line.split()
    if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
        return None, None
    return int(parts[0]), int(parts[1])
