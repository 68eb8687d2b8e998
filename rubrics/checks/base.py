"""What every check key provides, and the small helpers the check families share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import translate
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from rubrics.trajectory import Trajectory
from rubrics.trajectory.selectors import SELECTOR_HINTS, Selection, is_valid_selector, select
from rubrics.wording import ERROR, WARNING  # noqa: F401 - the severities the check families report
from rubrics.wording import did_you_mean

LintProblem = tuple[str, str, str]  # (severity, code, message); the message starts with the field name


class CheckError(Exception):
    """A failure of the grader itself (invalid regex at run time, a custom check that crashed), never missing data."""


@dataclass(frozen=True)
class CheckOutcome:
    met: bool
    evidence: str  # what was found, or what was missing; one or two short lines


@runtime_checkable
class CheckSpec(Protocol):
    key: str
    config_model: type[BaseModel]

    def run(self, config: Any, trajectory: Trajectory) -> CheckOutcome: ...

    def lint(self, config: Any) -> list[LintProblem]: ...


class CheckConfig(BaseModel):
    """Base of the built-in config models: unknown keys are errors, and a config is immutable so that
    compiled patterns can be cached on it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# ------------------------------------------------------------------------------------------ helpers


def select_text(trajectory: Trajectory, selector: str) -> Selection:
    try:
        return select(trajectory, selector)
    except ValueError as error:  # the linter reports this first; reaching here is a rubric the linter never saw
        raise CheckError(str(error)) from None


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A case-insensitive glob (fnmatch syntax) as a compiled regex."""
    return re.compile(translate(pattern), re.IGNORECASE | re.DOTALL)


def glob_problem(pattern: str) -> str | None:
    """Why a glob is invalid: fnmatch silently treats an unclosed "[" as a literal, which is never what was meant."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 1
            if j >= len(pattern):
                return f"unclosed '[' at position {i}"
            i = j
        i += 1
    return None


def lint_glob(field: str, pattern: str | None) -> list[LintProblem]:
    problem = glob_problem(pattern) if pattern is not None else None
    return [(ERROR, "invalid-glob", f"{field}: invalid glob {pattern!r}: {problem}")] if problem else []


def lint_selector(field: str, selector: str) -> list[LintProblem]:
    if is_valid_selector(selector):
        return []
    known = "final_answer, assistant, transcript, emails, files, files.<path>, tool_calls, state.<path>"
    hint = did_you_mean(selector, SELECTOR_HINTS)   # the same hint as judge evidence's selectors get
    return [(ERROR, "unknown-selector", f"{field}: unknown selector {selector!r}{hint}; expected one of {known}")]


def as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def quote(text: str, limit: int = 60) -> str:
    """A short quoted excerpt for evidence."""
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def missing_evidence(selector: str, selection: Selection) -> str:
    return selection.missing or f"{selector} is empty"


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON means it: true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b
