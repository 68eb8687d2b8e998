"""`rubric tasks check|run|validate DIR`: check task folders, grade attempts in a sandbox, validate the tasks."""
from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser("tasks", help="work on a delivery's task folders",
                                   description="Work on the task folders of a delivery.")
    actions = parser.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check", help="validate every task folder",
        description="Validate every task folder under DIR (DIR/tasks/*, DIR/heldout/*, DIR/* or DIR itself): "
                    "task.yaml against its schema; Dockerfile, tools.json and an executable grade.sh present; "
                    "for test-graded tasks, tests/ split into fail-to-pass and pass-to-pass (files or folders "
                    "named *fail_to_pass* / *pass_to_pass*) and solution.patch; for tasks naming a rubric: in "
                    "task.yaml, that rubric linted. Exit 1 when any error is found.")
    check.add_argument("dir", metavar="DIR")
    check.add_argument("--quiet", "-q", action="store_true", help="print errors only, not warnings")
    check.set_defaults(handler=run_check)

    run = actions.add_parser(
        "run", help="grade attempts with each task's grade.sh in a sandbox",
        description="For each attempt under ATTEMPTS/<task-id>/ (a <name>.patch against the task's starting "
                    "state repo/, or a <name>/ folder holding the whole workspace), build the workspace, put the "
                    "task's hidden tests/ back over it, and run grade.sh in a sandbox: no network, the task folder "
                    "read-only, only the workspace writable, a fresh /tmp, wall-time, memory and process limits, "
                    "every process killed at the end. Writes one JSON line per attempt (the input of `rubric "
                    "pass-rates`). Exit 1 when an attempt could not be graded or ATTEMPTS holds something else.")
    run.add_argument("dir", metavar="DIR")
    run.add_argument("--attempts", required=True, metavar="ATTEMPTS", help="folder of attempts, one sub-folder per task")
    run.add_argument("--output", "-o", default=None, help="where to write the JSON lines (default DIR/results.jsonl)")
    _sandbox_options(run)
    run.set_defaults(handler=run_attempts)

    validate = actions.add_parser(
        "validate", help="prove each task solvable by its solution and not solved by doing nothing",
        description="Per test-graded task, run grade.sh in the sandbox twice: with solution.patch applied (every "
                    "fail-to-pass and pass-to-pass test must pass) and on the untouched starting state (every "
                    "fail-to-pass test must fail, every pass-to-pass test pass). Prints the failing tests of each "
                    "invalid task and writes validation.json, which `rubric report` turns into removal reasons. "
                    "Exit 1 when a task is invalid.")
    validate.add_argument("dir", metavar="DIR")
    validate.add_argument("--output", "-o", default=None, help="where to write the JSON (default DIR/validation.json)")
    _sandbox_options(validate)
    validate.set_defaults(handler=run_validate)


def _sandbox_options(parser) -> None:
    parser.add_argument("--jobs", "-j", type=int, default=1, help="attempts graded at once (default 1)")
    parser.add_argument("--runtime", choices=("bwrap", "docker"), default="bwrap",
                        help="bwrap (bubblewrap, the default) or docker (the task's Dockerfile; needs a daemon)")
    parser.add_argument("--timeout", type=float, default=300.0, help="wall-time limit per grading, seconds (default 300)")
    parser.add_argument("--memory", type=int, default=2048, help="memory limit in MiB (default 2048)")
    parser.add_argument("--processes", type=int, default=256, help="process limit (default 256)")


def _settings(args):
    from rubrics.delivery.runs.run_batch import RunSettings
    from rubrics.delivery.sandbox.limits import SandboxLimits

    limits = SandboxLimits(wall_s=args.timeout, memory_mb=args.memory, processes=args.processes)
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    return RunSettings(runtime=args.runtime, limits=limits, jobs=args.jobs)


def run_check(args) -> int:
    import sys
    from pathlib import Path

    from rubrics.delivery.tasks.folder_check import check_delivery
    from rubrics.rubric.problems import ERROR

    root = Path(args.dir)
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    delivery, problems = check_delivery(root)
    errors = sum(p.severity == ERROR for p in problems)
    for problem in problems:
        if problem.severity == ERROR or not args.quiet:
            print(problem.format_at_path())
    warnings = len(problems) - errors
    print(f"{len(delivery.all_tasks())} task folder(s): {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors else 0


def run_attempts(args) -> int:
    import sys
    from pathlib import Path

    from rubrics.cli.table import align, printable
    from rubrics.delivery.runs.run_batch import run_batch, write_results
    from rubrics.delivery.sandbox.base import SandboxUnavailable

    root, attempts = Path(args.dir), Path(args.attempts)
    for path in (root, attempts):
        if not path.is_dir():
            print(f"{path}: not a directory", file=sys.stderr)
            return 2
    try:
        settings = _settings(args)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2

    def progress(result) -> None:
        print(f"{result.trajectory_id}: {result.status} ({result.score:g})", file=sys.stderr, flush=True)

    try:
        batch = run_batch(root, attempts, settings, on_done=progress)
    except SandboxUnavailable as exc:
        print(f"cannot grade: {exc}", file=sys.stderr)
        return 2
    output = Path(args.output) if args.output else root / "results.jsonl"
    write_results(batch.results, output)
    for problem in batch.problems:
        print(printable(problem), file=sys.stderr)
    rows = [["attempt", "status", "score", "fail-to-pass", "pass-to-pass", "seconds", "note"]]
    for r in batch.results:
        note = ("touched " + ", ".join(r.touched_tests)) if r.touched_tests else (r.message or "")
        rows.append([r.trajectory_id, r.status, f"{r.score:g}", f"{r.fail_to_pass.passed}/{r.fail_to_pass.total}",
                     f"{r.pass_to_pass.passed}/{r.pass_to_pass.total}", f"{r.timings.total_s:.1f}",
                     printable(note)[:80]])
    print("\n".join(align(rows)))
    ungraded = sum(not r.complete for r in batch.results)
    print(f"{len(batch.results)} attempt(s) graded with {settings.runtime}: "
          f"{sum(r.status == 'passed' for r in batch.results)} passed, {ungraded} not graded; wrote {output}",
          file=sys.stderr)
    return 1 if ungraded or batch.problems else 0


def run_validate(args) -> int:
    import sys
    from pathlib import Path

    from rubrics.delivery.sandbox.base import SandboxUnavailable
    from rubrics.delivery.runs.validate import VALIDATION_FILE, validate_delivery

    root = Path(args.dir)
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    try:
        report = validate_delivery(root, _settings(args))
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except SandboxUnavailable as exc:
        print(f"cannot validate: {exc}", file=sys.stderr)
        return 2
    output = Path(args.output) if args.output else root / VALIDATION_FILE
    output.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    for task in report.tasks:
        print(f"{task.task_id}: {task.verdict}")
        for reason in task.reasons:
            print(f"  {reason}")
    print(f"{report.valid} valid, {report.invalid} invalid, {report.skipped} skipped; wrote {output}", file=sys.stderr)
    return 1 if report.invalid else 0
