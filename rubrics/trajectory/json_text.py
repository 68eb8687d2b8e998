"""JSON text from users in, strict JSON out: the hostile cases that `json.loads` and `json.dumps` leave open.

Reading: a decode failure of any kind (bad syntax, an integer literal past Python's digit limit, nesting past
MAX_NESTING, bytes that are not UTF-8) becomes one `JSONTextError` with the line and column of the culprit,
so a loader can report it against the right line and keep going. Writing: `dumps` refuses NaN and infinities
(strict JSON) and spells lone surrogates, which UTF-8 cannot carry, as the text `\\udXXX`.
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# Deeper documents are refused up front: Python's decoder and any recursive code reading the decoded value
# (validation, selectors, checks) would otherwise hit the interpreter's recursion limit, near 1,000 frames.
MAX_NESTING = 500

# A JSON string token, consumed whole so that brackets and digits inside strings are never counted.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_BRACKETS = re.compile(_STRING + r"|[\[\]{}]")
_BRACKETS_AND_COMMAS = re.compile(_STRING + r"|[\[\]{},]")
JSON_WHITESPACE = " \t\r\n"
_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONTextError(ValueError):
    """Text that does not decode; line and column (1-based) are relative to the text given."""

    def __init__(self, message: str, line: int = 1, column: int | None = None):
        super().__init__(f"column {column}: {message}" if column is not None else message)
        self.reason = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class TextLine:
    """One line of a JSON Lines file: its text, or why its bytes are not text."""

    number: int
    text: str | None
    error: JSONTextError | None = None

    @property
    def blank(self) -> bool:
        """Nothing but JSON whitespace: a line of other blanks (a no-break space) is a bad line, not an empty one."""
        return self.text is not None and not self.text.strip(JSON_WHITESPACE)


def position(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both 1-based, of a character offset."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _error_at(text: str, offset: int, message: str) -> JSONTextError:
    line, column = position(text, offset)
    return JSONTextError(message, line, column)


SHARED_STRING_CHARS = 64


def _sharing_short_strings() -> Callable[[dict], dict]:
    """An object hook that gives each short string value one object per document: a long chat repeats "ok", "Let me
    check." and its tools' names thousands of times, at about 50 bytes an object. The table lives for one document
    only (sys.intern's strings outlive their users on Python 3.12), so unique hostile strings cost nothing later."""
    table: dict[str, str] = {}

    def share(obj: dict) -> dict:
        for key, value in obj.items():
            if type(value) is str and len(value) <= SHARED_STRING_CHARS:
                obj[key] = table.setdefault(value, value)
        return obj
    return share


def loads(text: str) -> Any:
    """json.loads, with every failure a positioned JSONTextError, and short string values shared."""
    too_deep = _nesting_overflow(text)
    if too_deep is not None:
        raise _error_at(text, too_deep, f"nested deeper than {MAX_NESTING} levels")
    try:
        return json.loads(text, object_hook=_sharing_short_strings())
    except json.JSONDecodeError as error:
        raise JSONTextError(f"invalid JSON: {error.msg}", error.lineno, error.colno) from None
    except RecursionError:   # only when the caller's own stack is already deep
        raise JSONTextError(f"nested too deeply for the decoder (limit {MAX_NESTING} levels)") from None
    except ValueError as error:   # int() refused a literal longer than sys.get_int_max_str_digits()
        raise _long_integer_error(text, error) from None


def _nesting_overflow(text: str) -> int | None:
    """Offset of the first bracket that opens level MAX_NESTING + 1, outside strings; None if there is none."""
    if text.count("[") + text.count("{") <= MAX_NESTING:   # cheap: most documents cannot be that deep
        return None
    depth = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return match.start()
        elif token in "]}":
            depth -= 1
    return None


def top_level_array_spans(text: str) -> list[tuple[int, int]] | None:
    """(start, end) offsets of the elements of the JSON array that `text` holds, found by bracket depth alone
    (so an element too deep or too big to decode still has its place); None when `text` is not a
    bracket-balanced array with no empty element. One pass, no recursion."""
    start = len(text) - len(text.lstrip(JSON_WHITESPACE))
    if not text.startswith("[", start):
        return None
    depth, spans, element_from = 0, [], start + 1
    for match in _BRACKETS_AND_COMMAS.finditer(text, start):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            depth -= 1
            if depth == 0:
                last = _stripped_span(text, element_from, match.start())
                if last is None and spans:
                    return None   # a trailing comma
                spans += [last] if last is not None else []
                return spans if not text[match.end():].strip(JSON_WHITESPACE) else None
        elif token == "," and depth == 1:
            element = _stripped_span(text, element_from, match.start())
            if element is None:
                return None
            spans.append(element)
            element_from = match.end()
    return None


def _stripped_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """text[start:end] without its surrounding JSON whitespace, as offsets; None when nothing is left."""
    piece = text[start:end]
    stripped = piece.strip(JSON_WHITESPACE)
    if not stripped:
        return None
    first = start + len(piece) - len(piece.lstrip(JSON_WHITESPACE))
    return first, first + len(stripped)


def _long_integer_error(text: str, error: ValueError) -> JSONTextError:
    limit = sys.get_int_max_str_digits()
    # Lookarounds keep the integer part of a long float (which decodes fine) from matching.
    literal = re.compile(_STRING + rf"|(?<![\d.eE+-])-?\d{{{limit + 1},}}(?![\d.eE])")
    for match in literal.finditer(text):
        if not match.group().startswith('"'):
            digits = len(match.group().lstrip("-"))
            return _error_at(text, match.start(),
                             f"integer literal of {digits} digits is longer than the {limit} digits allowed")
    return JSONTextError(f"invalid JSON: {error}")


def decode_utf8(data: bytes) -> str:
    """bytes -> str, or a JSONTextError at the line and column of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[: error.start].decode("utf-8")   # valid up to the first bad byte
        line, column = position(before, len(before))
        bad = data[error.start : error.end].hex(" ")
        raise JSONTextError(f"invalid UTF-8 (byte 0x{bad.replace(' ', ' 0x')}: {error.reason})",
                            line, column) from None


def text_lines(data: bytes) -> Iterator[TextLine]:
    """The lines of a JSON Lines file, each decoded on its own so that one bad line costs only itself.

    Lines end at "\\n" only: U+2028, U+0085 and friends may appear raw inside JSON strings.
    """
    try:
        lines: Iterator[str | bytes] = _pieces(data.decode("utf-8"), "\n")
    except UnicodeDecodeError:
        lines = _pieces(data, b"\n")
    for number, line in enumerate(lines, start=1):
        if isinstance(line, str):
            yield TextLine(number, line)
            continue
        try:
            yield TextLine(number, decode_utf8(line))
        except JSONTextError as error:
            yield TextLine(number, None, error)


def _pieces(text, separator) -> Iterator:
    """text.split(separator), one piece at a time: a large file is never held as a list of all its lines."""
    start = 0
    while (end := text.find(separator, start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def escape_surrogates(text: str) -> str:
    """Lone surrogates (from a JSON "\\ud800" escape) as the text \\ud800: UTF-8 cannot encode them."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def without_surrogates(value: Any) -> Any:
    """A JSON-ready value with escape_surrogates applied to every string, keys included."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, dict):
        return {escape_surrogates(k) if isinstance(k, str) else k: without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_surrogates(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """Strict JSON that encodes to UTF-8: NaN and infinities raise ValueError, surrogates are escaped."""
    return json.dumps(without_surrogates(value), ensure_ascii=False, allow_nan=False, **options)
