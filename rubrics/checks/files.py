"""The `file` check: a file in state.files whose path matches a glob exists (or does not), with some text."""

from __future__ import annotations

from rubrics.checks.base import WARNING, CheckConfig, CheckOutcome, LintProblem, lint_glob, quote
from rubrics.trajectory.selectors import matching_files
from rubrics.trajectory import Trajectory


class FileConfig(CheckConfig):
    path: str
    exists: bool = True
    contains: str | None = None


def _names(paths: list[str], limit: int = 5) -> str:
    return ", ".join(paths[:limit]) + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


class FileCheck:
    key = "file"
    config_model = FileConfig

    def run(self, config: FileConfig, trajectory: Trajectory) -> CheckOutcome:
        files = trajectory.state.files
        found = matching_files(files, config.path)
        if config.contains is not None:
            wanted = config.contains.casefold()
            with_text = [p for p, content in found.items() if wanted in content.casefold()]
        else:
            with_text = list(found)
        text = f" containing {quote(config.contains, 40)}" if config.contains is not None else ""
        if config.exists:
            if with_text:
                return CheckOutcome(True, f"{_names(with_text)} matches {config.path!r}{text}")
            if found:
                lacking = quote(config.contains or "", 40)
                return CheckOutcome(False, f"{_names(list(found))} matches {config.path!r} but lacks {lacking}")
            return CheckOutcome(False, f"no file matches {config.path!r} in state.files ({_inventory(files)})")
        if with_text:
            return CheckOutcome(False, f"{_names(with_text)} matches {config.path!r}{text}; expected none")
        return CheckOutcome(True, f"no file matches {config.path!r}{text} ({_inventory(files)})")

    def lint(self, config: FileConfig) -> list[LintProblem]:
        problems = lint_glob("path", config.path)
        if config.contains == "":
            problems.append((WARNING, "empty-text", "contains: an empty string is found in any file"))
        return problems


def _inventory(files: dict[str, str]) -> str:
    return f"files: {_names(list(files))}" if files else "state.files is empty"


FILE = FileCheck()
