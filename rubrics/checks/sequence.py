"""The `tool_sequence` check: the named tools were called in this order.

`tool_sequence: [get_order, refund_order]` is met when a call to get_order is followed, at any distance, by a call
to refund_order (other calls may come between); `{tools: [...], strict: true}` wants them back to back. Names are
globs, case-sensitive like `tool_called`. The earliest match of each step is taken, which finds an ordered match
whenever one exists, in one pass over the calls.
"""

from __future__ import annotations

import re
from fnmatch import translate
from functools import cached_property
from typing import Any

from pydantic import Field, StrictBool, StrictStr, model_validator

from rubrics.checks.base import CheckConfig, CheckOutcome, LintProblem, lint_glob
from rubrics.trajectory import Trajectory

SHOWN_CALLS = 12   # evidence lists at most this many called tool names


class ToolSequenceConfig(CheckConfig):
    tools: list[StrictStr] = Field(min_length=1, max_length=64,
                                   description="Tool name globs, in the order they must be called.")
    strict: StrictBool = Field(False, description="true: the calls are consecutive, with no other call between.")

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        return {"tools": data} if isinstance(data, list) else data   # tool_sequence: [a, b]

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        mapping = handler(core_schema)
        short = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 64}
        return {"anyOf": [short, mapping]}

    @cached_property
    def regexes(self) -> list[re.Pattern[str]]:
        return [re.compile(translate(name), re.DOTALL) for name in self.tools]


def _ordered(names: list[str], steps: list[re.Pattern[str]]) -> list[int] | None:
    """Indexes of the earliest calls matching the steps in order, or None."""
    found, position = [], 0
    for step in steps:
        while position < len(names) and not step.match(names[position]):
            position += 1
        if position == len(names):
            return None
        found.append(position)
        position += 1
    return found


def _adjacent(names: list[str], steps: list[re.Pattern[str]]) -> list[int] | None:
    """Indexes of the first run of consecutive calls matching the steps, or None."""
    for start in range(len(names) - len(steps) + 1):
        if all(step.match(names[start + k]) for k, step in enumerate(steps)):
            return list(range(start, start + len(steps)))
    return None


def _longest_prefix(names: list[str], steps: list[re.Pattern[str]]) -> int:
    """How many leading steps an ordered match reaches: the evidence says where the sequence broke off."""
    position = 0
    for done, step in enumerate(steps):
        while position < len(names) and not step.match(names[position]):
            position += 1
        if position == len(names):
            return done
        position += 1
    return len(steps)


class ToolSequenceCheck:
    key = "tool_sequence"
    config_model = ToolSequenceConfig

    def run(self, config: ToolSequenceConfig, trajectory: Trajectory) -> CheckOutcome:
        names = [call.name for call in trajectory.tool_calls()]
        wanted = " → ".join(config.tools)
        how = "back to back" if config.strict else "in order"
        hits = (_adjacent if config.strict else _ordered)(names, config.regexes)
        if hits is not None:
            calls = ", ".join(f"#{i + 1}" for i in hits)
            return CheckOutcome(True, f"called {wanted} {how} (calls {calls} of {len(names)})")
        shown = ", ".join(names[:SHOWN_CALLS]) + (f", … ({len(names)} calls)" if len(names) > SHOWN_CALLS else "")
        reached = _longest_prefix(names, config.regexes)
        if reached == len(config.tools):   # strict only: in order, but with other calls between
            why = "they were called in order, but not back to back"
        elif reached == 0:
            why = f"no call to {config.tools[0]!r}"
        else:
            why = f"no call to {config.tools[reached]!r} after {config.tools[reached - 1]!r}"
        return CheckOutcome(False, f"{wanted} not called {how}: {why}; tools called: {shown or 'none'}")

    def lint(self, config: ToolSequenceConfig) -> list[LintProblem]:
        problems: list[LintProblem] = []
        for index, name in enumerate(config.tools):
            problems += lint_glob(f"tools[{index}]", name)
        return problems


TOOL_SEQUENCE = ToolSequenceCheck()
