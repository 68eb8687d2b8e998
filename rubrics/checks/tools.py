"""The `tool_called` check: how many tool calls match a name glob and argument values.

An argument value `{number: X, tolerance: T}` matches a number within T of X (absolute): tools receive amounts
that went through float arithmetic or formatting (84.5 vs 84.50000001), which an equality test would reject.
String values in `args` match case-sensitively unless `case_sensitive: false`; the tool name always does.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from fnmatch import translate
from functools import cached_property
from typing import Any

from pydantic import Field, field_validator, model_validator

from rubrics.checks.base import CheckConfig, CheckOutcome, LintProblem, glob_problem, json_equal, lint_glob
from rubrics.trajectory import ToolCall, Trajectory


class ToolCalledConfig(CheckConfig):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    min: int = Field(1, ge=0)
    max: int | None = Field(None, ge=0)
    case_sensitive: bool = Field(True, description=(
        "Whether string values in `args` (globs and exact text) match argument text case-sensitively (the "
        "default); false: `query: \"*DELETE*\"` also matches `delete from orders`. The tool `name` glob is "
        "always case-sensitive."))

    @field_validator("args")
    @classmethod
    def _numeric_args(cls, args: dict[str, Any]) -> dict[str, Any]:
        for key, value in args.items():
            if isinstance(value, dict) and "number" in value:
                problem = numeric_problem(value)
                if problem:
                    raise ValueError(f"args.{key}: {problem}")
        return args

    @model_validator(mode="after")
    def _range(self) -> ToolCalledConfig:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self

    @cached_property
    def name_regex(self) -> re.Pattern[str]:
        # Tool names are identifiers: matched case-sensitively, like fnmatchcase.
        return re.compile(translate(self.name), re.DOTALL)

    @cached_property
    def arg_globs(self) -> dict[str, re.Pattern[str]]:
        flags = re.DOTALL if self.case_sensitive else re.DOTALL | re.IGNORECASE
        return {key: re.compile(translate(v), flags) for key, v in self.args.items() if isinstance(v, str)}

    def describe(self) -> str:
        args = f" with args {json.dumps(self.args, ensure_ascii=False, default=str)}" if self.args else ""
        return f"{self.name!r}{args}"


NUMERIC_KEYS = {"number", "tolerance"}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def numeric_problem(spec: dict[str, Any]) -> str | None:
    """Why `{number: X, tolerance: T}` is invalid, or None."""
    unknown = sorted(set(spec) - NUMERIC_KEYS)
    if unknown:
        return f"unknown key {unknown[0]!r} in a numeric match (keys: number, tolerance)"
    if not _is_number(spec["number"]):
        return f"number must be a finite number, got {spec['number']!r}"
    tolerance = spec.get("tolerance", 0)
    if not _is_number(tolerance) or tolerance < 0:
        return f"tolerance must be a number >= 0, got {tolerance!r}"
    return None


def _as_number(actual: Any) -> float | None:
    """A JSON number, or text that is one ("84.50"): models often pass amounts as strings."""
    if _is_number(actual):
        return float(actual)
    if isinstance(actual, str) and len(actual) <= 64:
        try:
            value = float(actual.strip())
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return None


def _numeric_matches(spec: dict[str, Any], actual: Any) -> bool:
    value = _as_number(actual)
    # the tolerance gets a relative epsilon: 84.51 - 84.50 is 0.010000000000005116 in binary floating point
    bound = spec.get("tolerance", 0) + 1e-9 * max(1.0, abs(spec["number"]))
    return value is not None and abs(value - spec["number"]) <= bound


def _value_matches(wanted: Any, actual: Any, glob: re.Pattern[str] | None) -> bool:
    if isinstance(actual, list) and not isinstance(wanted, list):
        return any(_value_matches(wanted, item, glob) for item in actual)  # to: [a, b] matches to: a
    if isinstance(wanted, dict) and "number" in wanted:
        return _numeric_matches(wanted, actual)
    if glob is not None:
        text = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False, default=str)
        if glob.flags & re.IGNORECASE:
            return wanted.casefold() == text.casefold() or bool(glob.match(text))
        return wanted == text or bool(glob.match(text))
    return json_equal(wanted, actual)


def _matches(config: ToolCalledConfig, call: ToolCall) -> bool:
    if not config.name_regex.match(call.name):
        return False
    globs = config.arg_globs
    arguments = call.arguments
    return all(
        key in arguments and _value_matches(value, arguments[key], globs.get(key)) for key, value in config.args.items()
    )


class ToolCalledCheck:
    key = "tool_called"
    config_model = ToolCalledConfig

    def run(self, config: ToolCalledConfig, trajectory: Trajectory) -> CheckOutcome:
        calls = trajectory.tool_calls()
        count = sum(1 for call in calls if _matches(config, call))
        allowed = f"{config.min}..{'∞' if config.max is None else config.max}"
        met = count >= config.min and (config.max is None or count <= config.max)
        found = f"{count} call{'s' if count != 1 else ''} to {config.describe()} (allowed {allowed})"
        if met or count:
            return CheckOutcome(met, found)
        called = Counter(call.name for call in calls)
        names = ", ".join(f"{name} ×{n}" for name, n in called.most_common(6)) or "none"
        return CheckOutcome(False, f"{found}; tools called: {names}")

    def lint(self, config: ToolCalledConfig) -> list[LintProblem]:
        problems = lint_glob("name", config.name)
        for key, value in config.args.items():
            if isinstance(value, str) and glob_problem(value):
                problems += lint_glob(f"args.{key}", value)
        return problems


TOOL_CALLED = ToolCalledCheck()
