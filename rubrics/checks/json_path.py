"""The `json` check: the value at a dotted path of a JSON document equals / is one of / matches a value."""

from __future__ import annotations

import json
import re
from functools import cached_property
from typing import Any

from pydantic import Field, model_validator

from rubrics.checks.base import (
    ERROR,
    CheckConfig,
    CheckError,
    CheckOutcome,
    LintProblem,
    json_equal,
    lint_selector,
    missing_evidence,
    quote,
    select_text,
)
from rubrics.checks.patterns import Pattern, compile_pattern, lint_pattern, search
from rubrics.trajectory.selectors import DEFAULT_SELECTOR
from rubrics.trajectory import Trajectory

# One path step: a name, [3], [-1] or ["key with.dots"].
_STEP = re.compile(r"""\.?(?:(?P<name>[^.\[\]"]+)|\[(?P<index>-?\d+)\]|\["(?P<quoted>(?:[^"\\]|\\.)*)"\])""")
_OPENING_FENCE = re.compile(r"(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)")
_CLOSING_FENCE = re.compile(r" {0,3}(?P<fence>`{3,}|~{3,})[ \t]*")
_LINE_END = re.compile(r"\r\n|\r|\n")
_COMPARATORS = ("equals", "one_of", "matches")
_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


def parse_path(path: str) -> list[str | int]:
    """'a.b[0]["x.y"]' -> ["a", "b", 0, "x.y"]; "" and "$" are the document itself. ValueError if malformed."""
    text = path.strip()
    text = text[1:] if text.startswith("$") else text
    steps: list[str | int] = []
    position = 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None or (match.group("name") is not None and position > 0 and text[position] != "."):
            raise ValueError(f"cannot read path {path!r} at position {position}")
        if match.group("index") is not None:
            steps.append(int(match.group("index")))
        elif match.group("quoted") is not None:
            steps.append(json.loads(f'"{match.group("quoted")}"'))
        else:
            steps.append(match.group("name").strip())
        position = match.end()
    return steps


def render_path(steps: list[str | int]) -> str:
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out or "$"


def parse_document(text: str) -> tuple[Any, str | None]:
    """The JSON value of `text`, or of its first fenced ```json block; (None, reason) when neither parses."""
    try:
        return json.loads(text), None
    except ValueError as error:
        reason = f"{error}"
    except RecursionError:
        return None, "nested too deeply"
    blocks = fenced_blocks(text)
    tagged = [content for language, content in blocks if language.lower() == "json"]
    untagged = [content for language, content in blocks if not language]
    for block in tagged + untagged:
        try:
            return json.loads(block), None
        except (ValueError, RecursionError):
            continue
    return None, reason


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown text, as (language, content), in order, by CommonMark's fence rules
    read line by line (one pass, linear in the text): an opening fence is 3 or more backticks or tildes indented
    at most 3 spaces, then an info string whose first word is the language (a backtick fence's info string holds
    no backtick); its block ends at a closing fence of the same character, at least as long, indented at most 3
    spaces, followed by nothing but spaces and tabs, or at the end of the text; up to the opening fence's
    indentation is removed from each content line. Fences inside block quotes or list items are not looked for."""
    blocks: list[tuple[str, str]] = []
    opened: tuple[str, int, str] | None = None   # (fence, indent, language) of the block being read
    lines: list[str] = []
    for line in _LINE_END.split(text):
        if opened is None:
            match = _OPENING_FENCE.fullmatch(line)
            if match is None:
                continue
            fence, info = match.group("fence"), match.group("info").strip()
            if fence[0] == "`" and "`" in info:
                continue   # not a fence: an inline code span
            opened, lines = (fence, len(match.group("indent")), info.split()[0] if info else ""), []
            continue
        fence, indent, language = opened
        closing = _CLOSING_FENCE.fullmatch(line)
        if closing is not None and closing.group("fence")[0] == fence[0] and len(closing.group("fence")) >= len(fence):
            blocks.append((language, "\n".join(lines)))
            opened = None
            continue
        strip = len(line) - len(line.lstrip(" "))
        lines.append(line[min(strip, indent):])
    if opened is not None:   # an unclosed fence runs to the end of the text
        blocks.append((opened[2], "\n".join(lines)))
    return blocks


class JsonConfig(CheckConfig):
    in_: str = Field(DEFAULT_SELECTOR, alias="in")
    path: str = ""
    equals: Any = None
    one_of: list[Any] | None = None
    matches: str | None = None

    @model_validator(mode="after")
    def _one_comparator(self) -> JsonConfig:
        given = [name for name in _COMPARATORS if name in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(f"give exactly one of equals, one_of, matches (got {', '.join(given) or 'none'})")
        return self

    @cached_property
    def steps(self) -> list[str | int]:
        try:
            return parse_path(self.path)
        except ValueError as error:
            raise CheckError(f"path: {error}") from None

    @cached_property
    def regex(self) -> Pattern:
        return compile_pattern(self.matches or "", "matches")

    def wanted(self) -> str:
        if "equals" in self.model_fields_set:
            return f"expected {_show(self.equals)}"
        if self.one_of is not None:
            return f"expected one of {_show(self.one_of)}"
        return f"expected a match of {self.matches!r}"


def _show(value: Any, limit: int = 60) -> str:
    text = _JSON.encode(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _walk(document: Any, steps: list[str | int]) -> tuple[Any, str | None]:
    value = document
    for depth, step in enumerate(steps):
        where = render_path(steps[:depth])
        if isinstance(step, int):
            if not isinstance(value, list):
                return None, f"{where} is not a list"
            if not -len(value) <= step < len(value):
                return None, f"{where} has {len(value)} items, no [{step}]"
            value = value[step]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, dict):
            return None, f"{where} has no key {step!r}"
        else:
            return None, f"{where} is not an object"
    return value, None


class JsonCheck:
    key = "json"
    config_model = JsonConfig

    def run(self, config: JsonConfig, trajectory: Trajectory) -> CheckOutcome:
        steps = config.steps
        if config.matches is not None:
            config.regex  # compile first: an invalid regex is a grader error whatever the document holds
        selection = select_text(trajectory, config.in_)
        if not selection.text:
            return CheckOutcome(False, f"no JSON document: {missing_evidence(config.in_, selection)}")
        document, reason = trajectory.cached(f"json:{config.in_}", lambda: parse_document(selection.text))
        if reason is not None:
            return CheckOutcome(False, f"{config.in_} is not JSON ({reason}): {quote(selection.text, 50)}")
        value, missing = _walk(document, steps)
        at = render_path(steps)
        if missing is not None:
            return CheckOutcome(False, f"{at} not found in {config.in_}: {missing}")
        met = _compare(config, value)
        return CheckOutcome(met, f"{at} is {_show(value)}; {config.wanted()}")

    def lint(self, config: JsonConfig) -> list[LintProblem]:
        problems = lint_selector("in", config.in_) + lint_pattern("matches", config.matches)
        try:
            parse_path(config.path)
        except ValueError as error:
            problems.append((ERROR, "bad-path", f"path: {error}"))
        return problems


def _compare(config: JsonConfig, value: Any) -> bool:
    if "equals" in config.model_fields_set:
        return json_equal(config.equals, value)
    if config.one_of is not None:
        return any(json_equal(option, value) for option in config.one_of)
    text = value if isinstance(value, str) else _JSON.encode(value)
    return search(config.regex, text, "matches") is not None


JSON = JsonCheck()
