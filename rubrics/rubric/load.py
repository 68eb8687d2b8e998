"""Loading a rubric from a path, YAML text or dict: read (bounded), parse with positions, validate.

`analyze_rubric` never raises for bad content (it returns every problem, for `rubric lint`); `load_rubric` raises
a RubricError listing every error.
"""
from __future__ import annotations

from rubrics.rubric.problems import ERROR, Problem, RubricError
from rubrics.rubric.source_map import SourceMap, parse_yaml

MAX_RUBRIC_FILE_BYTES = 64 << 20   # a rubric is a few KB; a larger file is refused before it is read


def read_rubric(src) -> tuple[object, SourceMap, list[Problem], str]:
    """(data, source_map, problems, source name) for a path, YAML text or dict."""
    from pathlib import Path

    from rubrics.input_files import looks_like_path

    if isinstance(src, dict):
        return src, SourceMap(), [], "<dict>"
    if isinstance(src, Path) or (isinstance(src, str) and looks_like_path(src, (".yaml", ".yml"), yaml=True)):
        from rubrics.input_files import read_input_file

        path = Path(src)
        try:
            raw = read_input_file(path, MAX_RUBRIC_FILE_BYTES)   # a regular file only: never a FIFO or a device
        except OSError as exc:
            return None, SourceMap(), [Problem("", 1, 1, ERROR, f"cannot read the file: {exc}", "io-error")], str(src)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, SourceMap(), [_not_utf8(raw, exc)], str(src)
        return (*parse_yaml(text), str(src))
    if isinstance(src, str):
        return (*parse_yaml(src), "<text>")
    raise TypeError(f"a rubric is a path, YAML text, dict or Rubric, not {type(src).__name__}")


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> Problem:
    """The problem at the first byte that is not UTF-8 (its column counted in characters, as the editor shows)."""
    line_start = raw.rfind(b"\n", 0, exc.start) + 1
    line = raw.count(b"\n", 0, exc.start) + 1
    col = len(raw[line_start:exc.start].decode("utf-8", errors="replace")) + 1
    message = f"cannot read the file: byte 0x{raw[exc.start]:02x} is not UTF-8 ({exc.reason}); save the file as UTF-8"
    return Problem("", line, col, ERROR, message, "io-error")


def analyze_rubric(src):
    """(Rubric or None, every problem found, source name); never raises for bad rubric content."""
    from rubrics.rubric.validation import validate_rubric

    data, source_map, problems, source = read_rubric(src)
    if data is None and problems:
        return None, problems, source
    rubric, found = validate_rubric(data, source_map, source)
    problems = sorted(set(problems + found), key=lambda p: (p.line, p.col, p.path, p.code))
    if any(p.severity == ERROR for p in problems):
        rubric = None
    return rubric, problems, source


def load_rubric(src):
    """A Rubric from a path, YAML text, dict or Rubric; raises RubricError listing every error."""
    from rubrics.rubric.spec import Rubric

    if isinstance(src, Rubric):
        return src
    rubric, problems, source = analyze_rubric(src)
    if rubric is None:
        raise RubricError(source, [p for p in problems if p.severity == ERROR])
    return rubric
