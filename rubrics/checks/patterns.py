"""Rubric regexes (regex.pattern, number.pattern, json.matches): every one is compiled and matched here.

The text they run on is written by the agent being graded, so a pattern that backtracks catastrophically
on it, such as `(a|a)*$` on "aaaa...a!", could stall a whole grading batch. Patterns run on the `regex`
package rather than `re`: its match functions take a timeout, and in its default (VERSION0) mode it reads
the syntax of `re`, lookarounds and backreferences included, so existing rubrics keep working. google-re2
would be linear-time, but it refuses lookarounds and backreferences (`(?<!\\d)`, `\\1`), which rubrics use.
A match that runs out of time is a CheckError: that item is `error`, every other item still gets graded.
"""

from __future__ import annotations

import os
import re
from re import _constants as sre
from re import _parser as sre_parse
from typing import Iterator

import regex

from rubrics.checks.base import ERROR, WARNING, CheckError, LintProblem

DEFAULT_MATCH_TIMEOUT_S = 1.0


def _timeout_from_env() -> float:
    try:
        value = float(os.environ.get("RUBRICS_REGEX_TIMEOUT", DEFAULT_MATCH_TIMEOUT_S))
    except ValueError:
        return DEFAULT_MATCH_TIMEOUT_S
    return value if value > 0 else DEFAULT_MATCH_TIMEOUT_S


# Seconds one search (or one scan for all matches) may take before the item becomes an error.
MATCH_TIMEOUT_S = _timeout_from_env()

Pattern = regex.Pattern
Match = regex.Match


def compile_pattern(pattern: str, field: str, flags: int = 0) -> Pattern:
    try:
        return regex.compile(pattern, flags)
    except (regex.error, ValueError, OverflowError) as error:
        raise CheckError(f"{field}: invalid regex {pattern!r}: {error}") from None


def pattern_problem(pattern: str) -> str | None:
    """Why the pattern does not compile, or None."""
    try:
        regex.compile(pattern)
    except (regex.error, ValueError, OverflowError) as error:
        return str(error)
    return None


def lint_pattern(field: str, pattern: str | None) -> list[LintProblem]:
    if pattern is None:
        return []
    problem = pattern_problem(pattern)
    if problem is not None:
        return [(ERROR, "invalid-regex", f"{field}: invalid regex {pattern!r}: {problem}")]
    if nested_quantifier(pattern):
        return [(WARNING, "nested-quantifier",
                 f"{field}: {pattern!r} repeats a part that can match the same text in several ways (a "
                 "quantifier inside a quantifier, or overlapping alternatives under one): on text that almost "
                 f"matches it backtracks exponentially, and after {MATCH_TIMEOUT_S:g} s the item is an error; "
                 "make the repeated part unambiguous, or use an atomic group (?>...) or a possessive quantifier")]
    return []


def search(compiled: Pattern, text: str, field: str) -> Match | None:
    try:
        return compiled.search(text, timeout=MATCH_TIMEOUT_S)
    except TimeoutError:
        raise CheckError(_timed_out(compiled, text, field)) from None


def finditer(compiled: Pattern, text: str, field: str) -> Iterator[Match]:
    """Every match in turn; the timeout covers the whole scan, however many matches it yields."""
    try:
        yield from compiled.finditer(text, timeout=MATCH_TIMEOUT_S)
    except TimeoutError:
        raise CheckError(_timed_out(compiled, text, field)) from None


def _timed_out(compiled: Pattern, text: str, field: str) -> str:
    return (f"{field}: regex {compiled.pattern!r} gave no answer within {MATCH_TIMEOUT_S:g} s on {len(text):,} "
            "chars: it backtracks catastrophically on this text; rewrite it without nested or overlapping "
            "repetition (see `rubric lint`, nested-quantifier)")


# ------------------------------------------------------------------------------ lint: nested quantifiers

_LOOPS = (sre.MAX_REPEAT, sre.MIN_REPEAT)
_SAMPLE = frozenset(chr(c) for c in range(128)) | frozenset("é߷Ω\u00a0\u2028中😀")
_CATEGORIES = {
    sre.CATEGORY_DIGIT: str.isdecimal,
    sre.CATEGORY_SPACE: str.isspace,
    sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
}
_NOT_CATEGORIES = {sre.CATEGORY_NOT_DIGIT: sre.CATEGORY_DIGIT, sre.CATEGORY_NOT_SPACE: sre.CATEGORY_SPACE,
                   sre.CATEGORY_NOT_WORD: sre.CATEGORY_WORD}


def nested_quantifier(pattern: str) -> bool:
    """Whether a repetition can split the same text between iterations in more than one way: a loop in a
    loop whose inner part can also start the next iteration (`(a+)+`, `(a*)*`, `(\\w+\\s?)+`), or
    overlapping alternatives under a loop (`(a|a)*`, `(\\s|\\n)*`). Such a pattern can take exponential
    time on a text that almost matches. A pattern that `re` cannot parse (regex-only syntax) is not judged."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    analysis = _Analysis(parsed, ignore_case=bool(parsed.state.flags & re.IGNORECASE))
    try:
        return analysis.ambiguous(list(parsed), frozenset(), in_loop=False) or any(
            analysis.overlapping(alternatives) for alternatives in _looped_alternations(pattern))
    except RecursionError:
        return False


_GROUP_PREFIX = re.compile(r"(?:\?(?:P?<[A-Za-z_]\w*>|[aiLmsux-]*:|>|[=!]|<[=!]|[aiLmsux-]*(?=\))))?")
_LOOP_AFTER = re.compile(r"[*+]|\{\d*,\d*\}|\{\d*[2-9]\d*\}|\{\d{2,}\}")


def _looped_alternations(pattern: str) -> Iterator[list[str]]:
    """The alternatives of each group that a loop repeats, as source text. Read from the source because
    the parser of `re` merges them (`(a|a)` becomes the set `[a]`), while `regex` tries each in turn."""
    open_groups: list[list[int]] = []   # per open group: where each alternative starts
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
        elif char == "(":
            prefix = _GROUP_PREFIX.match(pattern, i + 1)
            open_groups.append([prefix.end()])
            i = prefix.end() - 1
        elif char == "|" and open_groups:
            open_groups[-1].append(i + 1)
        elif char == ")" and open_groups:
            starts = open_groups.pop()
            if len(starts) > 1 and _LOOP_AFTER.match(pattern, i + 1):
                ends = [start - 1 for start in starts[1:]] + [i]
                yield [pattern[start:end] for start, end in zip(starts, ends)]
        i += 1


def _class_end(pattern: str, i: int) -> int:
    """The index of the "]" that closes the class opened at i."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j


class _Analysis:
    """First-character sets over a sample alphabet (ASCII, a few non-ASCII characters and every literal
    of the pattern): enough to see that two parts of a pattern can consume the same character."""

    def __init__(self, parsed, ignore_case: bool):
        self.ignore_case = ignore_case
        self.alphabet = _SAMPLE | frozenset(_literals(parsed))

    def ambiguous(self, seq: list, follow: frozenset, in_loop: bool) -> bool:
        for i, (op, av) in enumerate(seq):
            rest, rest_nullable = self.first(seq[i + 1:])
            after = rest | follow if rest_nullable else rest
            if op in _LOOPS:
                low, high, body = av
                looping = high > 1 and low < high
                body_first, _ = self.first(list(body))
                if looping and in_loop and body_first & after:
                    return True
                # Only the next iteration matters: an overlap with what follows the loop costs a
                # polynomial number of tries ((ba+)*a), an overlap with the loop's own start an exponential one.
                inner_follow = body_first if looping else after
                if self.ambiguous(list(body), inner_follow, in_loop or looping):
                    return True
            elif op == sre.SUBPATTERN:
                if self.ambiguous(list(av[-1]), after, in_loop):
                    return True
            elif op == sre.BRANCH:
                alternatives = [list(alt) for alt in av[1]]
                if in_loop and _overlap([self.first(alt)[0] for alt in alternatives]):
                    return True
                if any(self.ambiguous(alt, after, in_loop) for alt in alternatives):
                    return True
            elif op in (sre.ATOMIC_GROUP, sre.POSSESSIVE_REPEAT):
                body = av if op == sre.ATOMIC_GROUP else av[2]
                if self.ambiguous(list(body), frozenset(), in_loop=False):   # never backtracked into
                    return True
        return False

    def overlapping(self, alternatives: list[str]) -> bool:
        firsts = []
        for alternative in alternatives:
            try:
                firsts.append(self.first(list(sre_parse.parse(alternative)))[0])
            except (re.error, RecursionError, OverflowError, ValueError):   # e.g. \1 outside its group
                return False
        return _overlap(firsts)

    def first(self, seq: list) -> tuple[frozenset, bool]:
        """(the characters a match of seq can start with, whether seq can match the empty string)."""
        found: frozenset = frozenset()
        for op, av in seq:
            chars, nullable = self.first_of(op, av)
            found |= chars
            if not nullable:
                return found, False
        return found, True

    def first_of(self, op, av) -> tuple[frozenset, bool]:
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            return frozenset(c for c in self.alphabet if self.consumes(op, av, c)), False
        if op in (*_LOOPS, sre.POSSESSIVE_REPEAT):
            chars, nullable = self.first(list(av[2]))
            return chars, nullable or av[0] == 0
        if op in (sre.SUBPATTERN, sre.ATOMIC_GROUP):
            return self.first(list(av[-1] if op == sre.SUBPATTERN else av))
        if op == sre.BRANCH:
            results = [self.first(list(alt)) for alt in av[1]]
            return frozenset().union(*(r[0] for r in results)), any(r[1] for r in results)
        if op == sre.GROUPREF_EXISTS:
            results = [self.first(list(alt)) for alt in av[1:] if alt is not None]
            return frozenset().union(*(r[0] for r in results)), True
        return frozenset(), True   # anchors, lookarounds, backreferences: zero width here

    def consumes(self, op, av, char: str) -> bool:
        chars = {char, char.swapcase()} if self.ignore_case else {char}
        return any(_consumes(op, av, c) for c in chars)


def _consumes(op, av, char: str) -> bool:
    if op == sre.LITERAL:
        return ord(char) == av
    if op == sre.NOT_LITERAL:
        return ord(char) != av
    if op == sre.ANY:
        return True
    items = list(av)
    negate = bool(items) and items[0][0] == sre.NEGATE
    hit = any(_in_item(kind, value, char) for kind, value in items[1 if negate else 0:])
    return hit != negate


def _in_item(kind, value, char: str) -> bool:
    if kind == sre.LITERAL:
        return ord(char) == value
    if kind == sre.RANGE:
        return value[0] <= ord(char) <= value[1]
    if kind == sre.CATEGORY:
        if value in _CATEGORIES:
            return _CATEGORIES[value](char)
        if value in _NOT_CATEGORIES:
            return not _CATEGORIES[_NOT_CATEGORIES[value]](char)
    return True   # a class item we do not model: assume it may match (this only errs towards warning)


def _overlap(sets: list[frozenset]) -> bool:
    seen: set = set()
    for chars in sets:
        if seen & chars:
            return True
        seen |= chars
    return False


def _literals(parsed) -> Iterator[str]:
    for op, av in parsed:
        if op == sre.LITERAL:
            yield chr(av)
        elif op == sre.IN:
            yield from (chr(v) for k, v in av if k == sre.LITERAL)
        elif isinstance(av, (tuple, list)):
            for part in av:
                if isinstance(part, sre_parse.SubPattern):
                    yield from _literals(part)
                elif isinstance(part, list):   # the alternatives of a BRANCH
                    for alt in part:
                        if isinstance(alt, sre_parse.SubPattern):
                            yield from _literals(alt)
