"""Facts on a judge item: the literals and numbers its being met depends on, found in its evidence without a model.

    judge: {text: flags the 2 expenses approved without sign-off, facts: [EXP-221, EXP-307]}

A judge item with facts is met only when every fact is present in the evidence the judge is shown and the judge
says met; a penalty applies only when every fact is present and the judge says the behaviour occurred. A missing
fact decides the item at once (unmet, and no judge is asked), and the result's evidence names it.

How a fact is written and matched (docs/guide/rubric-format.md, "Facts"):
- a string that reads wholly as a number (`48.2L`, `$3,125`, `12%`, `-42`), or a YAML number, is a **number**: any
  number in the evidence, read as the `number` check reads numbers (thousands and Indian grouping, lakh and crore,
  k/m/bn, currency signs, accounting parentheses), that equals it within its tolerance (`{number: 48.2L,
  tolerance: 0.5%}`; exact by default);
- any other string is a **literal**: found case-insensitively (Unicode case folding), any run of blanks matching any
  run of blanks, and never inside a longer number: a literal that starts or ends with a digit is not matched next
  to another digit (`EXP-22` is not found in `EXP-221`; `2024-04-03` is found in `2024-04-03T15:45`).
  `{text: "884213"}` makes a string a literal even when it reads as a number; `case_sensitive: true` matches case;
- `{any: [...]}`: present when one of its facts is (the same time written in several zones, say).
Matching is linear in the evidence: literals are plain substring searches, numbers one scan of the evidence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Annotated, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, TypeAdapter, \
    field_validator

from rubrics.checks.base import quote
from rubrics.checks.numbers import ParsedNumber, Tolerance, find_numbers, format_decimal, parse_expected, \
    parse_number, parse_tolerance

MAX_FACTS = 16          # per item
MAX_ALTERNATIVES = 16   # per {any: [...]}
FactText = Annotated[StrictStr, Field(min_length=1, max_length=512)]
NumberValue = Union[StrictInt, StrictFloat, FactText]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NumberFact(_Strict):
    """A number the evidence must contain, within a tolerance."""
    number: NumberValue = Field(description="The number, written as in a report: 48.2L, $3,125, 12%, -42.")
    tolerance: NumberValue | None = Field(None, description="Absolute (1000, 0.5L) or relative (0.5%); exact if absent.")

    @field_validator("number")
    @classmethod
    def _reads_as_number(cls, value):
        if parse_expected(value) is None:
            raise ValueError(f"cannot read {value!r} as a number")
        return value

    @field_validator("tolerance")
    @classmethod
    def _reads_as_tolerance(cls, value):
        if value is not None and parse_tolerance(value) is None:
            raise ValueError(f"cannot read {value!r} as a number or a percentage (e.g. 0.5% or 1000)")
        return value


class TextFact(_Strict):
    """A literal the evidence must contain, even one that reads as a number."""
    text: FactText
    case_sensitive: StrictBool = False


SimpleFact = Union[StrictInt, StrictFloat, FactText, NumberFact, TextFact]


class AnyFact(_Strict):
    """Present when one of its facts is."""
    any: list[SimpleFact] = Field(min_length=2, max_length=MAX_ALTERNATIVES)


FactSpec = Union[StrictInt, StrictFloat, FactText, NumberFact, TextFact, AnyFact]


@dataclass(frozen=True)
class EvidenceText:
    """One evidence block prepared for matching: its name, its text with blanks collapsed and case folded, and its
    numbers (each computed once, whatever the number of facts)."""
    name: str
    text: str

    @cached_property
    def folded(self) -> str:
        return " ".join(self.text.split()).casefold()

    @cached_property
    def collapsed(self) -> str:
        return " ".join(self.text.split())

    @cached_property
    def numbers(self) -> tuple[ParsedNumber, ...]:
        return tuple(find_numbers(self.text))


@dataclass(frozen=True)
class Literal:
    text: str
    case_sensitive: bool = False

    @property
    def shown(self) -> str:
        return quote(self.text, 60)

    def find(self, block: EvidenceText) -> str | None:
        needle = " ".join(self.text.split())
        haystack = block.collapsed if self.case_sensitive else block.folded
        needle = needle if self.case_sensitive else needle.casefold()
        start = haystack.find(needle)
        while start >= 0:
            end = start + len(needle)
            if _clear_of_digits(haystack, start, end):
                return block.collapsed[start:end] if len(block.collapsed) == len(haystack) else needle
            start = haystack.find(needle, start + 1)
        return None


def _clear_of_digits(text: str, start: int, end: int) -> bool:
    """A literal that starts (ends) with a digit must not continue a longer number on that side."""
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    return not (text[start].isdigit() and before.isdigit()) and not (text[end - 1].isdigit() and after.isdigit())


@dataclass(frozen=True)
class Number:
    written: str
    value: Decimal
    tolerance: Tolerance
    tolerance_written: str | None = None

    @property
    def shown(self) -> str:
        return self.written + (f" ± {self.tolerance_written}" if self.tolerance.amount else "")

    def find(self, block: EvidenceText) -> str | None:
        for found in block.numbers:
            if any(self.tolerance.allows(value, self.value) for value in found.candidates()):
                same = found.text.replace(" ", "") == self.written.replace(" ", "")
                return found.text if same else f"{found.text} (= {format_decimal(found.value)})"
        return None


@dataclass(frozen=True)
class AnyOf:
    alternatives: tuple[Literal | Number, ...]

    @property
    def shown(self) -> str:
        return "one of " + ", ".join(a.shown for a in self.alternatives)

    def find(self, block: EvidenceText) -> str | None:
        return next((found for a in self.alternatives if (found := a.find(block)) is not None), None)


Fact = Literal | Number | AnyOf


def compile_fact(spec: FactSpec | dict) -> Fact:
    """The matcher of one fact (a validated FactSpec, or the same as it is written: a str, a number or a mapping)."""
    if isinstance(spec, dict):
        spec = TypeAdapter(FactSpec).validate_python(spec)
    if isinstance(spec, AnyFact):
        return AnyOf(tuple(compile_fact(alternative) for alternative in spec.any))   # type: ignore[misc]
    if isinstance(spec, TextFact):
        return Literal(spec.text, spec.case_sensitive)
    if isinstance(spec, NumberFact):
        return _number(spec.number, spec.tolerance)
    if isinstance(spec, str) and parse_number(spec) is None:
        return Literal(spec)
    return _number(spec, None)


def _number(value, tolerance) -> Number:
    parsed = parse_expected(value)
    rule = parse_tolerance(tolerance)
    if parsed is None or rule is None:   # validated before; a fact built in code gets the same message
        raise ValueError(f"facts: cannot read {value!r} (tolerance {tolerance!r}) as a number")
    written = str(value).strip()
    return Number(written, parsed.value, rule, None if tolerance is None else str(tolerance))


@dataclass(frozen=True)
class FactFound:
    fact: Fact
    block: str | None    # the evidence block it was found in; None when missing
    as_written: str | None = None


@dataclass(frozen=True)
class FactsOutcome:
    """Each fact of an item, found (where, as written) or missing."""
    found: tuple[FactFound, ...]
    searched: tuple[str, ...]   # the evidence blocks' names

    @property
    def missing(self) -> tuple[Fact, ...]:
        return tuple(f.fact for f in self.found if f.block is None)

    @property
    def complete(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        """"facts 'EXP-221', 48.2L ± 0.5% (as '48,20,000 (= 4,820,000)') found in final_answer" or "fact 'EXP-307'
        not found in final_answer, emails (found: 'EXP-221' in final_answer)"."""
        if self.complete:
            noun = "fact" if len(self.found) == 1 else "facts"
            return f"{noun} {self._present('found in')}"
        missing = ", ".join(fact.shown for fact in self.missing)
        noun = "fact" if len(self.missing) == 1 else "facts"
        present = self._present("in")
        also = f" (found: {present})" if present else ""
        return f"{noun} {missing} not found in {', '.join(self.searched)}{also}"

    def _present(self, where: str) -> str:
        """The facts found, grouped by the block they were found in ("'A', 'B' {where} final_answer"), each as
        written where that differs."""
        by_block: dict[str, list[str]] = {}
        for f in self.found:
            if f.block is not None:
                written = f" (as {quote(f.as_written, 40)})" if f.as_written and \
                    f.as_written.casefold() != _plain(f.fact) else ""
                by_block.setdefault(f.block, []).append(f.fact.shown + written)
        return "; ".join(f"{', '.join(shown)} {where} {block}" for block, shown in by_block.items())


def _plain(fact: Fact) -> str | None:
    return fact.text.casefold() if isinstance(fact, Literal) else None


def match_facts(facts: tuple[Fact, ...], blocks: list[EvidenceText]) -> FactsOutcome:
    """Every fact looked up in every block, in order; a fact counts where it is first found."""
    found = []
    for fact in facts:
        hit = next(((block.name, where) for block in blocks if (where := fact.find(block)) is not None), None)
        found.append(FactFound(fact, hit[0], hit[1]) if hit else FactFound(fact, None))
    return FactsOutcome(tuple(found), tuple(block.name for block in blocks))


# ------------------------------------------------------------------------------ what `rubric lint` suggests

_MONTHS = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|" \
          r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_NAMED = re.compile(
    r"(?P<address>[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8})"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2} " + _MONTHS + r"(?: \d{4})?\b|\b" + _MONTHS + r" \d{1,2}(?:, \d{4})?\b)"
    r"|(?P<id>\b(?=[A-Za-z0-9-]{0,39}\d)(?=[A-Za-z0-9-]{0,39}[A-Z])[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){1,4}\b"
    r"|\bv\d{1,4}(?:\.\d{1,4}){1,3}\b|\b\d{3,12}(?:-\d{2,12}){1,3}\b)")
KINDS = {"address": "an address", "date": "a date", "id": "an id", "amount": "an amount"}


@dataclass(frozen=True)
class Named:
    """Something a text names that a fact could require: its text as written, and what it is."""
    text: str
    kind: str


def named_facts(text: str, limit: int = 8, *, bare_decimals: bool = True) -> list[Named]:
    """The ids, amounts, addresses and dates a text names, in order, at most `limit` (the patterns are bounded, so
    this is linear in the text). bare_decimals=False: an amount needs a currency, a scale, a percent sign or
    thousands separators (in a reference, a bare 7.035 is more often an explanation than a value to report)."""
    found: dict[str, Named] = {}
    spans = []
    for match in _NAMED.finditer(text):
        kind = match.lastgroup or "id"
        found.setdefault(match.group(0), Named(match.group(0), kind))
        spans.append(match.span())
    for number in find_numbers(text):
        inside = any(start <= number.start < end for start, end in spans)
        if not inside and _is_amount(number, bare_decimals):
            found.setdefault(number.text, Named(number.text, "amount"))
    ordered = sorted(found.values(), key=lambda named: text.find(named.text))
    return ordered[:limit]


def _is_amount(number: ParsedNumber, bare_decimals: bool = True) -> bool:
    """A figure: written with a currency, a scale, a percent sign, thousands separators or (bare_decimals) decimals
    (a bare integer is more often a count, a year or a label than an amount the item depends on)."""
    marks = r"[₹$€£,]|rs|inr|usd|eur|gbp|[kKlLmMbB]\b|lakh|crore|million|billion|bn" + (r"|\." if bare_decimals else "")
    return bool(number.percent or re.search(marks, number.text, re.I))
