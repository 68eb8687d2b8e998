"""Lint the rubric of a rubric-graded task with rubrics.rubric.lint (what `rubric lint` runs), as folder-check problems."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from rubrics.rubric.problems import Problem


def lint_rubric(path: Path, shown: str) -> list[Problem]:
    # Lazy: the rubric validator pulls in the check registry, which `tasks check` needs only for rubric tasks.
    from rubrics.rubric.lint import lint_file

    found = []
    for p in lint_file(path):
        message = f"{p.path}: {p.message}" if p.path else p.message
        found.append(dataclasses.replace(p, path=shown, message=message, code=f"rubric-{p.code}"))
    return found
