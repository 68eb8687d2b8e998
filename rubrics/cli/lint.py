"""`rubric lint FILE...`: every problem as `path:line:col: severity: message [code]`; exit 1 on any error."""
from __future__ import annotations

import re

RUBRIC_FILE = re.compile(r"(^|/)(rubric[^/]*|[^/]*\.rubric)\.ya?ml$")


def register(subparsers) -> None:
    parser = subparsers.add_parser("lint", help="check rubric files (schema and rules beyond it)",
                                   description="Check rubric files. A directory is searched for files named "
                                               "rubric*.yaml or *.rubric.yaml. Exit 1 when any error is found.")
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--quiet", "-q", action="store_true", help="print errors only, not warnings")
    parser.set_defaults(handler=run)


def expand(paths: list[str]) -> list[str]:
    from pathlib import Path

    files = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files += sorted(str(p) for p in path.rglob("*") if p.is_file() and RUBRIC_FILE.search(p.as_posix()))
        else:
            files.append(name)
    return files


def run(args) -> int:
    from rubrics.rubric.lint import lint_file
    from rubrics.rubric.problems import has_errors
    from rubrics.rubric.problems import ERROR

    failed = False
    for name in expand(args.files):
        problems = lint_file(name)
        failed |= has_errors(problems)
        for problem in problems:
            if problem.severity == ERROR or not args.quiet:
                print(problem.format(name))
    return 1 if failed else 0
