"""`rubric tasks check DIR`: every problem of every task folder as `path: message [code]`; exit 1 on any error."""
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


def run_check(args) -> int:
    import sys
    from pathlib import Path

    from rubrics.delivery.folder_check import check_delivery

    root = Path(args.dir)
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    delivery, problems = check_delivery(root)
    errors = sum(p.severity == "error" for p in problems)
    for problem in problems:
        if problem.severity == "error" or not args.quiet:
            print(problem.format())
    warnings = len(problems) - errors
    print(f"{len(delivery.all_tasks())} task folder(s): {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors else 0
