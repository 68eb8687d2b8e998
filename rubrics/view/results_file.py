"""Reading a results file for the viewer: every good result, and every bad line as a problem with its line number.

Accepts what `rubric grade` writes: JSON lines (--format jsonl) or one JSON array (--format json). A line that is
not JSON, or not a result, costs only itself: the page shows it as an error and the rest of the run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from rubrics.trajectory.json_text import JSONTextError, decode_utf8, loads, position, text_lines, top_level_array_spans
from rubrics.result import Result

# A problem's message is shown on the page; a 10 MB bad line must not become a 10 MB message.
MESSAGE_LIMIT = 500


@dataclass(frozen=True)
class LineProblem:
    file: str
    line: int
    message: str


@dataclass(frozen=True)
class ResultsFile:
    path: str
    results: list[Result] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)   # the line each result starts on, in step with results
    problems: list[LineProblem] = field(default_factory=list)


def load_results(path: str | Path) -> ResultsFile:
    """Raises OSError when the file cannot be read; everything inside it is reported, never raised."""
    path = Path(path)
    data = path.read_bytes()
    name = str(path)
    try:
        text = decode_utf8(data)
    except JSONTextError:
        return _from_lines(name, data)   # bad bytes: line by line, so only the lines holding them are lost
    spans = top_level_array_spans(text)
    if spans is not None:
        return _from_array(name, text, spans)
    return _from_lines(name, data)


def _from_lines(name: str, data: bytes) -> ResultsFile:
    loaded = ResultsFile(name)
    for line in text_lines(data):
        if line.error is not None:
            loaded.problems.append(LineProblem(name, line.number, _short(str(line.error))))
        elif not line.blank:
            _add(loaded, line.number, line.text)
    return loaded


def _from_array(name: str, text: str, spans: list[tuple[int, int]]) -> ResultsFile:
    loaded = ResultsFile(name)
    for start, end in spans:
        _add(loaded, position(text, start)[0], text[start:end])
    return loaded


def _add(loaded: ResultsFile, number: int, text: str) -> None:
    try:
        loaded.results.append(Result.model_validate(loads(text)))
        loaded.lines.append(number)
    except JSONTextError as exc:
        loaded.problems.append(LineProblem(loaded.path, number + exc.line - 1, _short(str(exc))))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the line"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        loaded.problems.append(LineProblem(loaded.path, number,
                                           _short(f"not a result: {where}: {first['msg']}{more}")))


def _short(message: str) -> str:
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT] + "…"
