"""`rubric tasks run`: every attempt of a batch graded in the sandbox, one RunResult per attempt."""
from __future__ import annotations

import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rubrics.delivery.runs.attempts import AttemptRef, discover_attempts
from rubrics.delivery.tasks.catalog import load_catalog
from rubrics.delivery.runs.grade_attempt import GradedTask, grade_attempt, graded_task
from rubrics.delivery.runs.job_pool import run_jobs
from rubrics.delivery.runs.records import RunResult, TestTally, Timings
from rubrics.delivery.sandbox import make_sandbox
from rubrics.delivery.sandbox.base import Runtime, Sandbox
from rubrics.delivery.sandbox.limits import SandboxLimits


@dataclass(frozen=True)
class RunSettings:
    runtime: Runtime = "bwrap"
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    jobs: int = 1


@dataclass
class Batch:
    results: list[RunResult]
    problems: list[str]


def load_graded_tasks(root: Path, settings: RunSettings) -> tuple[dict[str, GradedTask], list[str]]:
    """Test-graded tasks of the delivery by id; rubric-graded ones are named in the problems."""
    delivery, specs, catalog_problems = load_catalog(root)
    problems = [p.format_at_path() for p in catalog_problems]
    tasks: dict[str, GradedTask] = {}
    for ref in delivery.all_tasks():
        spec = specs.get(ref.id)
        if spec is not None and spec.rubric is not None:
            continue
        tasks[ref.id] = graded_task(ref.id, root / ref.path, settings.runtime, settings.limits)
    return tasks, problems


def run_batch(root: Path, attempts_dir: Path, settings: RunSettings,
              on_done: Callable[[RunResult], None] | None = None, sandbox: Sandbox | None = None) -> Batch:
    sandbox = sandbox or make_sandbox(settings.runtime)   # raises SandboxUnavailable before any work
    tasks, problems = load_graded_tasks(root, settings)
    _, specs, _ = load_catalog(root)
    rubric_graded = {t for t, s in specs.items() if s.rubric is not None}
    listing = discover_attempts(attempts_dir, set(tasks) | rubric_graded)
    problems += listing.problems
    attempts = []
    for attempt in listing.attempts:
        if attempt.task_id in rubric_graded:
            problems.append(f"{attempt.path}: {attempt.task_id} is graded by its rubric; grade its trajectories "
                            "with `rubric grade`")
        else:
            attempts.append(attempt)
    work_root = Path(tempfile.mkdtemp(prefix="rubric-tasks-run-"))
    try:
        def work(attempt: AttemptRef, slot: int) -> RunResult:
            task = tasks[attempt.task_id]
            return guarded(task, attempt.name, attempt.kind,
                           lambda: grade_attempt(task, attempt, attempt.name, attempt.kind, sandbox,
                                                 settings.limits, work_root, slot))

        results = run_jobs(attempts, work, settings.jobs, on_done)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    return Batch(results, problems)


def guarded(task: GradedTask, label: str, kind: str, grade: Callable[[], RunResult]) -> RunResult:
    """A failure of the harness itself becomes that attempt's sandbox-error line; the batch goes on."""
    try:
        return grade()
    except Exception as exc:   # noqa: BLE001 - one attempt must never sink the batch
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        empty = TestTally(passed=0, total=0)
        return RunResult(trajectory_id=f"{task.task_id}/{label}", task_id=task.task_id, attempt=label,
                         attempt_kind=kind, status="sandbox-error", score=0.0, complete=False, exit_code=None,
                         fail_to_pass=empty, pass_to_pass=empty, tests=[], touched_tests=[], left_processes=None,
                         timings=Timings(workspace_s=0, grade_s=0, total_s=0), grader=task.grader,
                         message=f"harness error: {detail}", log_tail="")


def write_results(results: list[RunResult], path: Path) -> None:
    text = "".join(r.model_dump_json() + "\n" for r in results)
    path.write_text(text, encoding="utf-8")
