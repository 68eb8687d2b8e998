"""Text checks: `contains` (one or more substrings) and `regex` (a search, bounded in time: see patterns.py)."""

from __future__ import annotations

from functools import cached_property

from pydantic import Field, field_validator

from rubrics.checks.base import (
    WARNING,
    CheckConfig,
    CheckOutcome,
    LintProblem,
    lint_selector,
    missing_evidence,
    quote,
    select_text,
)
from rubrics.checks.patterns import Pattern, compile_pattern, lint_pattern, search
from rubrics.trajectory.selectors import DEFAULT_SELECTOR
from rubrics.trajectory import Trajectory


class ContainsConfig(CheckConfig):
    in_: str = Field(DEFAULT_SELECTOR, alias="in")
    text: str | list[str]
    all: bool = True
    case_sensitive: bool = False

    @field_validator("text")
    @classmethod
    def _not_empty(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one text")
        return value

    @cached_property
    def needles(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)


class ContainsCheck:
    key = "contains"
    config_model = ContainsConfig

    def run(self, config: ContainsConfig, trajectory: Trajectory) -> CheckOutcome:
        selection = select_text(trajectory, config.in_)
        needles = config.needles
        if not selection.text:
            return CheckOutcome(False, f"{_list(needles)} not found: {missing_evidence(config.in_, selection)}")
        haystack = selection.text if config.case_sensitive else _folded(trajectory, config.in_, selection.text)
        present = [n for n in needles if (n if config.case_sensitive else n.casefold()) in haystack]
        absent = [n for n in needles if n not in present]
        where = f"in {config.in_} ({len(selection.text):,} chars)"
        if config.all:
            if not absent:
                return CheckOutcome(True, f"found {_list(present)} in {config.in_}")
            return CheckOutcome(False, f"{_list(absent)} not found {where}" + _also_found(present))
        if present:
            return CheckOutcome(True, f"found {_list(present)} in {config.in_}")
        return CheckOutcome(False, f"none of {_list(needles)} found {where}")

    def lint(self, config: ContainsConfig) -> list[LintProblem]:
        problems = lint_selector("in", config.in_)
        if any(not n for n in config.needles):
            problems.append((WARNING, "empty-text", "text: an empty string is found in any text"))
        return problems


def _folded(trajectory: Trajectory, selector: str, text: str) -> str:
    # Case folding the transcript once per trajectory, not once per check.
    return trajectory.cached(f"casefold:{selector}", text.casefold)


def _list(texts: list[str]) -> str:
    shown = ", ".join(quote(t, 40) for t in texts[:5])
    return shown + (f" and {len(texts) - 5} more" if len(texts) > 5 else "")


def _also_found(present: list[str]) -> str:
    return f" (found {_list(present)})" if present else ""


class RegexConfig(CheckConfig):
    in_: str = Field(DEFAULT_SELECTOR, alias="in")
    pattern: str

    @cached_property
    def regex(self) -> Pattern:
        return compile_pattern(self.pattern, "pattern")


class RegexCheck:
    key = "regex"
    config_model = RegexConfig

    def run(self, config: RegexConfig, trajectory: Trajectory) -> CheckOutcome:
        regex = config.regex
        selection = select_text(trajectory, config.in_)
        shown = f"pattern '{config.pattern}'"
        if not selection.text:
            return CheckOutcome(False, f"{shown} not searched: {missing_evidence(config.in_, selection)}")
        match = search(regex, selection.text, "pattern")
        if match is None:
            return CheckOutcome(False, f"{shown} does not match {config.in_} ({len(selection.text):,} chars)")
        line = selection.text.count("\n", 0, match.start()) + 1
        return CheckOutcome(True, f"matched {quote(match.group(0))} at line {line} of {config.in_}")

    def lint(self, config: RegexConfig) -> list[LintProblem]:
        return lint_selector("in", config.in_) + lint_pattern("pattern", config.pattern)


CONTAINS = ContainsCheck()
REGEX = RegexCheck()
