"""`rubric tasks validate`: the reference solution solves each task and doing nothing does not.

Per test-graded task, four sandboxed runs of grade.sh: solution.patch applied to the start (every
fail-to-pass and pass-to-pass test must pass, and grade.sh exit 0), the untouched start (every
fail-to-pass test must fail, every pass-to-pass test pass), the start with a forging test runner
planted in /repo (pytest.py, sitecustomize.py: see shadow_probe), and the start with a forge appended to
every module it imports (see inprocess_probe). In the last two no fail-to-pass test may pass: one that does
means grade.sh runs a tool the workspace can replace, or trusts a report the tested code can write.
Rubric-graded tasks are skipped.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rubrics.delivery.runs.attempts import AttemptRef
from rubrics.delivery.tasks.catalog import load_catalog
from rubrics.delivery.tasks.folder_check import SOLUTION
from rubrics.delivery.runs.grade_attempt import GradedTask, grade_attempt
from rubrics.delivery.runs.job_pool import run_jobs
from rubrics.delivery.runs.run_batch import RunSettings, guarded, load_graded_tasks
from rubrics.delivery.runs.records import RunResult
from rubrics.delivery.sandbox import make_sandbox
from rubrics.delivery.sandbox.base import Sandbox
from rubrics.delivery.sandbox.inprocess_probe import plant_in_process_forge
from rubrics.delivery.sandbox.shadow_probe import PLANTED, plant_forge
from rubrics.delivery.runs.validation_records import RunCheck, TaskValidation, ValidationReport

VALIDATION_FILE = "validation.json"


def validate_delivery(root: Path, settings: RunSettings, sandbox: Sandbox | None = None) -> ValidationReport:
    sandbox = sandbox or make_sandbox(settings.runtime)
    tasks, _ = load_graded_tasks(root, settings)
    _, specs, _ = load_catalog(root)
    runs = [(task, which) for task in tasks.values() if (task.folder / SOLUTION).is_file()
            for which in ("solution", "start", "shadow", "in-process")]
    work_root = Path(tempfile.mkdtemp(prefix="rubric-tasks-validate-"))
    try:
        def work(item: tuple[GradedTask, str], slot: int) -> RunResult:
            task, which = item
            attempt = AttemptRef(task.task_id, which, "patch", task.folder / SOLUTION) if which == "solution" else None
            plant = {"shadow": plant_forge, "in-process": plant_in_process_forge}.get(which)
            kind = "start" if plant is not None else which
            return guarded(task, which, kind, lambda: grade_attempt(task, attempt, which, kind, sandbox,
                                                                    settings.limits, work_root, slot, plant))

        results = run_jobs(runs, work, settings.jobs)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    by_task = {(r.task_id, r.attempt): r for r in results}
    verdicts = []
    for task_id in sorted(set(tasks) | set(specs)):
        if task_id not in tasks:
            verdicts.append(TaskValidation(task_id=task_id, verdict="skipped", solution=None, start=None,
                                           reasons=["graded by its rubric: no solution.patch to run"]))
        elif (task_id, "solution") not in by_task:
            verdicts.append(TaskValidation(task_id=task_id, verdict="invalid", solution=None, start=None,
                                           reasons=[f"{SOLUTION} missing: nothing proves the task solvable"]))
        else:
            verdicts.append(_verdict(task_id, by_task[(task_id, "solution")], by_task[(task_id, "start")],
                                     by_task[(task_id, "shadow")], by_task[(task_id, "in-process")]))
    return ValidationReport(runtime=settings.runtime, valid=sum(v.verdict == "valid" for v in verdicts),
                            invalid=sum(v.verdict == "invalid" for v in verdicts),
                            skipped=sum(v.verdict == "skipped" for v in verdicts), tasks=verdicts)


def _verdict(task_id: str, solution: RunResult, start: RunResult, shadow: RunResult,
             in_process: RunResult) -> TaskValidation:
    solved = RunCheck(status=solution.status, score=solution.score,
                      wrong=[f"{t.id}: {t.status}" for t in solution.tests if t.status != "passed"])
    wants = {"fail_to_pass": False, "pass_to_pass": True}
    untouched = RunCheck(status=start.status, score=start.score,
                         wrong=[f"{t.id}: {t.status}" for t in start.tests
                                if t.kind in wants and (t.status == "passed") != wants[t.kind]])
    reasons = []
    for run, check in (("solution", solved), ("start", untouched)):
        if run == "solution" and check.status != "passed" and not check.wrong:
            reasons.append(f"with solution.patch: {check.status}" + _why(solution))
        if run == "start" and check.status in ("sandbox-error", "bad-attempt", "timeout"):
            reasons.append(f"untouched start: {check.status}" + _why(start))
    if solved.wrong:
        reasons.append("with solution.patch, not passing: " + ", ".join(solved.wrong))
    f2p_at_start = [w for w in untouched.wrong if "fail_to_pass" in w]
    p2p_at_start = [w for w in untouched.wrong if "fail_to_pass" not in w]
    if f2p_at_start:
        reasons.append("untouched start already passes fail-to-pass: " + ", ".join(f2p_at_start))
    if p2p_at_start:
        reasons.append("untouched start fails pass-to-pass: " + ", ".join(p2p_at_start))
    # Only what a plant changed counts: a fail-to-pass test the untouched start already passes is reported above.
    if (forged := _forged(start, shadow)) is not None:
        reasons.append(f"grade.sh can be shadowed from the workspace: with a forging {' and '.join(PLANTED)} "
                       f"planted in /repo, the untouched start got {shadow.status}{forged}"
                       " (run the test runner with `python -I`, never from a path /repo can shadow)")
    if (forged := _forged(start, in_process)) is not None:
        reasons.append("grade.sh trusts a report the tested code can write: with a forge appended to every module "
                       "of the start (at import it writes a report naming every test passed and exits 0), the "
                       f"untouched start got {in_process.status}{forged} (run pytest in grade.sh's environment, "
                       "which loads the harness's result channel: never under `env -i` or with PYTEST_PLUGINS "
                       "cleared, and do not read the verdict from the report or the exit status alone)")
    if not any(t.kind == "fail_to_pass" for t in solution.tests):
        reasons.append("no fail-to-pass test found in the grader's report")
    return TaskValidation(task_id=task_id, verdict="invalid" if reasons else "valid", reasons=reasons,
                          solution=solved, start=untouched)


def _forged(start: RunResult, probe: RunResult) -> str | None:
    """' with <tests> passed' (or '') when the probe passed a fail-to-pass test the untouched start fails, or
    passed outright where the start does not; None when the probe fooled nothing."""
    passed_at_start = {t.id for t in start.tests if t.status == "passed"}
    forged = [t.id for t in probe.tests
              if t.kind == "fail_to_pass" and t.status == "passed" and t.id not in passed_at_start]
    if forged:
        return " with " + ", ".join(forged) + " passed"
    if probe.status == "passed" and not probe.tests and start.status != "passed":
        return ""
    return None


def _why(result: RunResult) -> str:
    return f" ({result.message})" if result.message else ""
