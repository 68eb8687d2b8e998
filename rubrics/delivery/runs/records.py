"""One line of `rubric tasks run` output: how one attempt fared against its task's hidden tests.

The line carries what `rubric pass-rates` reads (trajectory_id, task_id, score, complete), so the
file feeds the pass rates directly, and what a person needs to see why: statuses, timings, log tail.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics.delivery.runs.attempts import AttemptKind
from rubrics.delivery.tasks.expected_tests import TestKind
from rubrics.delivery.runs.junit import TestStatus
from rubrics.delivery.sandbox.base import Runtime

RunStatus = Literal["passed", "failed", "timeout", "process-limit", "memory", "left-processes", "bad-attempt",
                    "sandbox-error"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TestOutcome(_Strict):
    id: str = Field(description="tests/<file>::<test>, as the hidden tests name it.")
    kind: TestKind | None = Field(description="Null for a reported test outside both kinds.")
    status: TestStatus = Field(description="missing: defined in the hidden tests but absent from the grader's report.")


class TestTally(_Strict):
    passed: int = Field(ge=0)
    total: int = Field(ge=0)


class Timings(_Strict):
    workspace_s: float = Field(ge=0, description="Building the workspace and restoring the hidden tests.")
    grade_s: float = Field(ge=0, description="grade.sh in the sandbox, start to last process killed.")
    total_s: float = Field(ge=0)


class GraderInfo(_Strict):
    runtime: Runtime
    grade_sh_sha256: str | None = Field(description="Digest of the task's grade.sh; null when it is missing.")
    tests_sha256: str = Field(description="Digest of the hidden tests/ (paths and contents).")
    wall_s: float
    memory_mb: int
    processes: int


class RunResult(_Strict):
    model_config = ConfigDict(extra="forbid", title="TaskRunResult")

    version: Literal[1] = 1
    trajectory_id: str = Field(description="<task id>/<attempt name>.")
    task_id: str
    attempt: str
    attempt_kind: AttemptKind | Literal["start", "solution"] = Field(
        description="patch or snapshot for an attempt; start (untouched) or solution (solution.patch) in validation.")
    status: RunStatus
    score: float = Field(ge=0, le=1, description="Share of hidden tests passed; 1 only when grade.sh exits 0 and every "
                                                   "test passes; 0 on timeout, left processes or a bad attempt.")
    complete: bool = Field(description="False when the sandbox failed: the attempt was not graded.")
    exit_code: int | None = Field(description="grade.sh's exit status; null when it did not finish.")
    fail_to_pass: TestTally
    pass_to_pass: TestTally
    tests: list[TestOutcome]
    touched_tests: list[str] = Field(description="Hidden test files the attempt edited, deleted or planted; it was "
                                                 "graded against the originals all the same.")
    left_processes: int | None = Field(description="Processes alive when grade.sh exited (then killed).")
    timings: Timings
    grader: GraderInfo
    message: str | None = Field(description="Why the status, when the tests do not say it.")
    log_tail: str = Field(description="The last bytes of grade.sh's output.")
