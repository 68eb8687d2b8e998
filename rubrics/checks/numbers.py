"""The `number` check, and the parser for numbers as people write them in reports:
1,234,567 · 48,20,000 · ₹48.2 lakh · 4.82 Cr · $1.2bn · (1,234) · -5 · 12%."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import Any

from pydantic import Field, model_validator

from rubrics.checks.base import (
    ERROR,
    WARNING,
    CheckConfig,
    CheckError,
    CheckOutcome,
    LintProblem,
    lint_selector,
    missing_evidence,
    quote,
    select_text,
)
from rubrics.checks.patterns import Pattern, compile_pattern, finditer, lint_pattern
from rubrics.trajectory.selectors import DEFAULT_SELECTOR
from rubrics.trajectory import Trajectory

_SCALES = {
    "k": 3, "thousand": 3,
    "l": 5, "lakh": 5, "lakhs": 5, "lac": 5, "lacs": 5,
    "m": 6, "mm": 6, "mn": 6, "million": 6,
    "cr": 7, "crore": 7, "crores": 7,
    "b": 9, "bn": 9, "billion": 9,
}  # fmt: skip

# Single letters are suffixes only when attached ("48.2L", "$5m") or upper case ("48.2 L", "5 M"):
# "5 m" is five metres and "3 b" is an item label far more often than five million or three billion.
_SUFFIX = r"""
    (?:
        (?P<attached>(?i:k|mm|mn|m|bn|b|l|cr))(?![\w])
      | \s?(?P<word>(?i:thousand|lakhs?|lacs?|million|mn|crores?|cr|billion|bn)|K|L|M|MM|B)(?![\w])
    )?
    (?P<percent>\s?%)?
"""
# The groups are capped (up to 10^21 and 10^39) so that every match attempt reads a bounded stretch of text: with
# unbounded groups, the agent's "11,11,11,..." made each attempt read to the end, and a scan quadratic.
_NUMBER = re.compile(
    r"""
    (?<![\w.])
    (?P<sign>[-−+])?
    (?P<open>\(\s?)?
    (?P<currency>₹|\$|€|£|(?i:rs\.?|inr|usd|eur|gbp)(?=[\s\d₹$€£]))?\s?
    (?P<sign2>[-−])?
    (?P<digits>
        \d{1,2}(?:,\d{2}){1,8},\d{3}(?!\d)  # Indian grouping: 48,20,000
      | \d{1,3}(?:,\d{3}){1,12}(?!\d)       # 1,234,567
      | \d+
      | (?=\.\d)
    )
    (?P<fraction>\.\d+)?
    (?!\.\d|,\d{3})
    """
    + _SUFFIX
    + r"""
    (?P<close>\s?\))?
    (?![\w])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class ParsedNumber:
    value: Decimal  # scaled: "48.2L" -> 4820000; a percentage keeps its number: "12%" -> 12
    text: str  # as written
    start: int
    end: int
    percent: bool = False
    parenthesized: bool = False  # "(1,234)": negative in accounting, an aside in prose; both readings are tried

    def candidates(self) -> tuple[Decimal, ...]:
        return (self.value, -self.value) if self.parenthesized else (self.value,)


def _to_number(match: re.Match[str], text: str) -> ParsedNumber | None:
    digits, fraction = match.group("digits"), match.group("fraction") or ""
    if not digits and not fraction:
        return None
    value = Decimal((digits or "0").replace(",", "") + fraction)
    suffix = (match.group("attached") or match.group("word") or "").lower()
    if suffix:
        value = value.scaleb(_SCALES[suffix])
    if match.group("sign") in ("-", "−") or match.group("sign2"):
        value = -value
    parenthesized = bool(match.group("open") and match.group("close"))
    start, end = match.start(), match.end()
    if match.group("open") and not parenthesized:
        start = match.start("open") + len(match.group("open"))  # a lone "(" is punctuation, not part of it
    if match.group("close") and not parenthesized:
        end = match.start("close")
    return ParsedNumber(value, text[start:end].strip(), start, end, bool(match.group("percent")), parenthesized)


def find_numbers(text: str, start: int = 0, end: int | None = None):
    """Yields every number in text[start:end], in order."""
    for match in _NUMBER.finditer(text, start, len(text) if end is None else end):
        number = _to_number(match, text)
        if number is not None:
            yield number


def parse_number(text: str) -> ParsedNumber | None:
    """The number that makes up `text` (surrounding blanks allowed), or None."""
    stripped = str(text).strip()
    number = next(find_numbers(stripped), None)
    if number is not None and number.start == 0 and number.end == len(stripped):
        return number
    return None


def parse_expected(value: Any) -> ParsedNumber | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            return None
        return ParsedNumber(number, str(value), 0, len(str(value))) if number.is_finite() else None
    number = parse_number(value) if isinstance(value, str) else None
    if number is not None and number.parenthesized:  # in a rubric, "(3.5L)" can only mean accounting negative
        return ParsedNumber(-number.value, number.text, number.start, number.end, number.percent)
    return number


@dataclass(frozen=True)
class Tolerance:
    amount: Decimal
    relative: bool  # amount is a fraction of |expected|

    def allows(self, found: Decimal, expected: Decimal) -> bool:
        limit = self.amount * abs(expected) if self.relative else self.amount
        return abs(found - expected) <= limit

    def describe(self, written: str) -> str:
        return f" ± {written}" if self.amount else ""


_PLUS_MINUS = re.compile(r"^\s*(?:±|\+/-|\+-)\s*")


def parse_tolerance(value: Any) -> Tolerance | None:
    """0.5% -> relative 0.005; 1000, "10K", "0.5L" -> absolute; None when unparseable or negative."""
    if value is None:
        return Tolerance(Decimal(0), False)
    if isinstance(value, str):
        value = _PLUS_MINUS.sub("", value)
    number = parse_expected(value)
    if number is None or number.value < 0 or number.parenthesized:
        return None
    if number.percent:
        return Tolerance(number.value / 100, True)
    return Tolerance(number.value, False)


def format_decimal(value: Decimal) -> str:
    """4820000 -> "4,820,000"; 0.125 -> "0.125" (no exponent, no trailing zeros)."""
    normalized = value.normalize() if value else Decimal(0)  # no "-0"
    return f"{normalized:,f}"  # the "f" format writes 4.82E+6 out in full, whatever its exponent


class NumberConfig(CheckConfig):
    in_: str = Field(DEFAULT_SELECTOR, alias="in")
    label: str | None = None
    pattern: str | None = None
    expected: str | int | float
    tolerance: str | int | float | None = None

    @model_validator(mode="after")
    def _one_locator(self) -> NumberConfig:
        if (self.label is None) == (self.pattern is None):
            raise ValueError("give exactly one of `label` or `pattern`")
        if self.label is not None and not self.label.strip():
            raise ValueError("`label` must not be empty")
        return self

    @cached_property
    def expected_number(self) -> ParsedNumber:
        number = parse_expected(self.expected)
        if number is None:
            raise CheckError(f"expected: cannot read {self.expected!r} as a number")
        return number

    @cached_property
    def tolerance_rule(self) -> Tolerance:
        rule = parse_tolerance(self.tolerance)
        if rule is None:
            raise CheckError(f"tolerance: cannot read {self.tolerance!r} as a number or a percentage")
        return rule

    @cached_property
    def label_regex(self) -> re.Pattern[str]:
        # Case-insensitive; any run of blanks matches any run of blanks on the line; and a label that starts or
        # ends with a letter or digit is a whole word, so that "total" does not match inside "subtotal".
        label = (self.label or "").strip()
        body = r"[ \t]+".join(re.escape(w) for w in label.split())
        start = r"(?<!\w)" if label[:1].isalnum() else ""
        end = r"(?!\w)" if label[-1:].isalnum() else ""
        return re.compile(start + body + end, re.IGNORECASE)

    @cached_property
    def pattern_regex(self) -> Pattern:
        return compile_pattern(self.pattern or "", "pattern")


class NumberCheck:
    key = "number"
    config_model = NumberConfig

    def run(self, config: NumberConfig, trajectory: Trajectory) -> CheckOutcome:
        expected, tolerance = config.expected_number, config.tolerance_rule
        selection = select_text(trajectory, config.in_)
        if not selection.text:
            return CheckOutcome(False, f"no number found: {missing_evidence(config.in_, selection)}")
        found, where = (
            _after_label(config, selection.text) if config.label is not None else _by_pattern(config, selection.text)
        )
        want = f"expected {format_decimal(expected.value)}{tolerance.describe(str(config.tolerance))}"
        if found is None:
            return CheckOutcome(False, f"no number found {where} in {config.in_}; {want}")
        for value in found.candidates():
            if tolerance.allows(value, expected.value):
                return CheckOutcome(True, f"found {_describe(found, value)} {where}; {want}")
        return CheckOutcome(False, f"found {_describe(found, found.value)} {where}; {want}")

    def lint(self, config: NumberConfig) -> list[LintProblem]:
        problems = lint_selector("in", config.in_) + lint_pattern("pattern", config.pattern)
        if parse_expected(config.expected) is None:
            problems.append((ERROR, "bad-number", f"expected: cannot read {config.expected!r} as a number"))
        if parse_tolerance(config.tolerance) is None:
            message = f"tolerance: {config.tolerance!r} is not a number or a percentage (e.g. 0.5% or 1000)"
            problems.append((ERROR, "bad-tolerance", message))
        if config.pattern is not None and not any(severity == ERROR for severity, _, _ in problems):
            if config.pattern_regex.groups == 0:
                message = "pattern: has no group; the whole match is read as the number"
                problems.append((WARNING, "pattern-without-group", message))
        return problems


def _describe(found: ParsedNumber, value: Decimal) -> str:
    shown = format_decimal(value) + ("%" if found.percent else "")
    return found.text if found.text.replace(" ", "") == shown else f"{found.text} (= {shown})"


def _after_label(config: NumberConfig, text: str) -> tuple[ParsedNumber | None, str]:
    """The first number after the label on the same line; each occurrence of the label is tried in turn
    (a heading may repeat the label without a number). Once the rest of a line after an occurrence holds no
    number, the later occurrences on that line are skipped (their rest of the line is part of it): each line is
    scanned at most once, so an answer that repeats the label ten thousand times on one line costs one scan, not
    ten thousand."""
    where = f"after {config.label!r}"
    seen_label = False
    barren_until = -1   # the end of a line already known to hold no number after an earlier occurrence
    for match in config.label_regex.finditer(text):
        seen_label = True
        if match.start() < barren_until:
            continue
        line_end = text.find("\n", match.end())
        number = next(find_numbers(text, match.end(), None if line_end < 0 else line_end), None)
        if number is not None:
            return number, where
        barren_until = len(text) if line_end < 0 else line_end
    return None, where if seen_label else f"(label {config.label!r} not found)"


def _by_pattern(config: NumberConfig, text: str) -> tuple[ParsedNumber | None, str]:
    regex = config.pattern_regex
    where = f"by pattern '{config.pattern}'"
    matched = False
    for match in finditer(regex, text, "pattern"):
        matched = True
        group = match.group(1) if regex.groups else match.group(0)
        number = next(find_numbers(group), None) if group else None
        if number is not None:
            return number, f"{where} (matched {quote(match.group(0), 40)})"
    return None, where if matched else f"(pattern '{config.pattern}' did not match)"


NUMBER = NumberCheck()
