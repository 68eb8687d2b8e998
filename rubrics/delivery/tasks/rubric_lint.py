"""Lint the rubric of a rubric-graded task with rubrics.rubric.lint (what `rubric lint` runs), as folder-check problems."""
from __future__ import annotations

from pathlib import Path

from rubrics.delivery.problems import Problem


def lint_rubric(path: Path, shown: str) -> list[Problem]:
    # Lazy: the rubric validator pulls in the check registry, which `tasks check` needs only for rubric tasks.
    from rubrics.rubric.lint import lint_file
    from rubrics.rubric.problems import ERROR

    found = []
    for p in lint_file(path):
        message = f"{p.path}: {p.message}" if p.path else p.message
        severity = "error" if p.severity == ERROR else "warning"
        found.append(Problem(shown, message, f"rubric-{p.code}", severity, line=p.line or None, column=p.col or None))
    return found
