"""Grade one attempt: build its workspace, restore the hidden tests, run grade.sh in the sandbox, read the verdict."""
from __future__ import annotations

import hashlib
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rubrics.delivery.runs.attempts import AttemptRef
from rubrics.delivery.runs.channel_outcomes import DISAGREES, channel_verdict
from rubrics.delivery.tasks.expected_tests import ExpectedTest, expected_tests
from rubrics.delivery.runs.junit import JUnitReport, read_reports
from rubrics.delivery.runs.records import GraderInfo, RunResult, RunStatus, TestOutcome, TestTally, Timings
from rubrics.delivery.sandbox.base import GRADER, Sandbox, SandboxOutcome, SandboxRequest
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.work_quota import mount_quota, release
from rubrics.delivery.sandbox.workspace import START_DIR, TESTS_DIR, WorkspaceError, build_workspace, copy_tree, \
    restore_tests, touched_tests

# Read from the log tail: the kernel's refusal shows up only as the error the program printed.
_PROCESS_LIMIT = re.compile(r"Resource temporarily unavailable|BlockingIOError|fork: retry|Cannot fork")
_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|std::bad_alloc|[Oo]ut of memory")


@dataclass(frozen=True)
class GradedTask:
    task_id: str
    folder: Path
    expected: list[ExpectedTest]
    grader: GraderInfo

    @property
    def start(self) -> Path:
        return self.folder / START_DIR

    @property
    def hidden(self) -> Path:
        return self.folder / TESTS_DIR


def graded_task(task_id: str, folder: Path, runtime: str, limits: SandboxLimits) -> GradedTask:
    grade_sh = folder / GRADER
    digest = hashlib.sha256(grade_sh.read_bytes()).hexdigest() if grade_sh.is_file() else None
    info = GraderInfo(runtime=runtime, grade_sh_sha256=digest, tests_sha256=_tree_digest(folder / TESTS_DIR),
                      wall_s=limits.wall_s, memory_mb=limits.memory_mb, processes=limits.processes)
    hidden = folder / TESTS_DIR
    return GradedTask(task_id, folder, expected_tests(hidden) if hidden.is_dir() else [], info)


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    if root.is_dir():
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def grade_attempt(task: GradedTask, attempt: AttemptRef | None, label: str, kind: str, sandbox: Sandbox,
                  limits: SandboxLimits, work_root: Path, slot: int,
                  plant: Callable[[Path], None] | None = None) -> RunResult:
    """attempt None grades the untouched start; `label` names the run (attempt name, 'start' or 'solution').

    `plant`, when given, adds files to the built workspace (validation's shadowing probe plants a forge)."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"{task.task_id}-", dir=work_root))
    mounted = mount_quota(work, limits.disk_mb)   # the disk cap on /repo and /report, where we may mount
    try:
        workspace, sealed, report = work / "workspace", work / "sealed", work / "report"
        report.mkdir()
        touched: list[str] = []
        try:
            build_workspace(attempt, task.start, workspace)
            if plant is not None:
                plant(workspace)
            touched = touched_tests(task.start, workspace, task.hidden)
            restore_tests(workspace, task.hidden)
            copy_tree(task.hidden, sealed)
        except (WorkspaceError, OSError) as exc:
            return _result(task, label, kind, "bad-attempt", None, [], touched, None,
                           Timings(workspace_s=_since(started), grade_s=0, total_s=_since(started)), str(exc), "")
        prepared = _since(started)
        outcome = sandbox.run(SandboxRequest(task.task_id, task.folder.resolve(), workspace, sealed, report, slot),
                              limits)
        junit = read_reports(report)
        timings = Timings(workspace_s=prepared, grade_s=outcome.wall_s, total_s=_since(started))
        return _judge(task, label, kind, outcome, junit, touched, timings, limits)
    finally:
        release(work, mounted)


def _judge(task: GradedTask, label: str, kind: str, outcome: SandboxOutcome, junit: JUnitReport,
           touched: list[str], timings: Timings, limits: SandboxLimits) -> RunResult:
    reported = _outcomes(task.expected, junit)
    tests, broken, overclaimed = reported, None, False
    notes = list(junit.problems)
    if outcome.channel is not None and outcome.channel.used:
        # pytest ran under the harness's plugin: its channel, which the tested code cannot write, decides.
        verdict = channel_verdict(outcome.channel)
        tests, broken = _outcomes(task.expected, verdict.cases), verdict.broken
        if junit.cases and [t.status for t in reported] != [t.status for t in tests]:
            notes.insert(0, DISAGREES)
            overclaimed = any(r.status == "passed" and t.status != "passed" for r, t in zip(reported, tests))
    forged = bool(broken) or overclaimed
    passed = sum(t.status == "passed" for t in tests)
    status: RunStatus
    if outcome.sandbox_error:
        status, notes = "sandbox-error", [outcome.sandbox_error, *notes]
    elif outcome.timed_out:
        status, notes = "timeout", [f"grade.sh ran past the {limits.wall_s:g}s wall-time limit", *notes]
    elif outcome.exit_code != 0 and _PROCESS_LIMIT.search(outcome.log_tail):
        status, notes = "process-limit", [f"a process could not fork: limit of {limits.processes} processes", *notes]
    elif outcome.memory_killed:
        status, notes = "memory", [f"the process tree went over its {limits.memory_mb} MiB memory cap "
                                   "(a process was killed)", *notes]
    elif outcome.exit_code != 0 and _MEMORY.search(outcome.log_tail):
        status, notes = "memory", [f"a process ran out of memory: limit of {limits.memory_mb} MiB", *notes]
    elif outcome.left_processes:
        status, notes = "left-processes", [f"{outcome.left_processes} process(es) still running after grade.sh "
                                           "exited (killed)", *notes]
    elif broken:
        status, notes = "failed", [broken, *notes]
    elif outcome.exit_code == 0 and all(t.status == "passed" for t in reported) and \
            (contradiction := _runner_disagrees(outcome)):
        status, notes, forged = "failed", [contradiction, *notes], True
    elif outcome.exit_code == 0 and passed == len(tests):
        status = "passed"
    else:
        status = "failed"
        if passed == len(tests) and tests:
            notes.insert(0, f"every test passed but grade.sh exited with {outcome.exit_code}")
    return _result(task, label, kind, status, outcome.exit_code, tests, touched, outcome.left_processes, timings,
                   "; ".join(notes) or None, outcome.log_tail, forged)


def _runner_disagrees(outcome: SandboxOutcome) -> str | None:
    """pytest printed failures or errors (read from the output on the host, as it went by) and yet the report
    says every test passed and the exit status is 0: the report or the status was rewritten by code that ran
    after the runner had finished, such as an atexit hook of the package under test."""
    bad = sum(n for counts in outcome.summaries for word, n in counts.items()
              if word in ("failed", "error", "errors"))
    if bad:
        return (f"the test runner printed {bad} failed or erroring test(s), yet its report says every test passed "
                "and grade.sh exited 0: the report was rewritten after the run")
    return None


def _score(status: RunStatus, exit_code: int | None, tests: list[TestOutcome], forged: bool = False) -> float:
    """forged: the run was caught rewriting its results (a report claiming passes the tests did not make, a
    tampered or unfinished result channel): nothing, not the share of tests it did pass."""
    if forged or status in ("sandbox-error", "bad-attempt", "timeout", "left-processes"):
        return 0.0
    if not tests:   # a grader without a report: its exit status is the verdict, unless the run failed otherwise
        return 1.0 if exit_code == 0 and status == "passed" else 0.0
    share = sum(t.status == "passed" for t in tests) / len(tests)
    if share == 1.0 and status != "passed":
        return 0.0
    return round(share, 6)


def _result(task: GradedTask, label: str, kind: str, status: RunStatus, exit_code: int | None,
            tests: list[TestOutcome], touched: list[str], left: int | None, timings: Timings, message: str | None,
            log_tail: str, forged: bool = False) -> RunResult:
    def tally(k: str) -> TestTally:
        of_kind = [t for t in tests if t.kind == k]
        return TestTally(passed=sum(t.status == "passed" for t in of_kind), total=len(of_kind))

    return RunResult(
        trajectory_id=f"{task.task_id}/{label}", task_id=task.task_id, attempt=label, attempt_kind=kind,
        status=status, score=_score(status, exit_code, tests, forged), complete=status != "sandbox-error",
        exit_code=exit_code, fail_to_pass=tally("fail_to_pass"), pass_to_pass=tally("pass_to_pass"), tests=tests,
        touched_tests=touched, left_processes=left, timings=timings, grader=task.grader, message=message,
        log_tail=log_tail,
    )


def _outcomes(expected: list[ExpectedTest], junit: JUnitReport) -> list[TestOutcome]:
    """Each expected test with its reported status; without expected tests, whatever the report holds."""
    if not expected:
        return [TestOutcome(id=f"{c.classname}::{c.name}", kind=_kind_of(c.classname), status=c.status)
                for c in junit.cases]
    found = []
    for test in expected:
        statuses = [c.status for c in junit.cases if c.dotted == test.dotted or c.dotted.endswith("." + test.dotted)]
        found.append(TestOutcome(id=test.id, kind=test.kind, status=_combined(statuses)))
    return found


def _combined(statuses: list[str]) -> str:
    if not statuses:
        return "missing"
    for worst in ("error", "failed", "skipped"):
        if worst in statuses:
            return worst
    return "passed"


def _kind_of(name: str) -> str | None:
    if "fail_to_pass" in name and "pass_to_pass" not in name.replace("fail_to_pass", ""):
        return "fail_to_pass"
    if "pass_to_pass" in name:
        return "pass_to_pass"
    return None


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)
