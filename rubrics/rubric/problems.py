"""Problems found in a rubric (located by file, line, column and field path) or in a delivery's files."""
from __future__ import annotations

from dataclasses import dataclass

# The severities are the ones every problem report shares (rubrics/wording.py, below the check families that
# report them too); rubric and delivery code names them from here, beside Problem.
from rubrics.wording import ERROR, WARNING  # noqa: F401 - WARNING: the other severity a Problem carries


def format_path(path: tuple) -> str:
    """("criteria", 4, "points") -> "criteria[4].points"."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class Problem:
    """One finding of `rubric lint` (path: a field path) or of the delivery tools (path: the file or folder at fault)."""

    path: str           # field path, e.g. "criteria[4].points", "" for the whole document; or the file at fault
    line: int           # 1-based; 0 when unknown (a rubric given as a dict, a finding about a whole file)
    col: int
    severity: str       # "error" | "warning"
    message: str
    code: str           # stable identifier, e.g. "duplicate-id"

    @classmethod
    def about(cls, path: str, message: str, code: str, severity: str = ERROR, *, line: int = 0, col: int = 0) -> Problem:
        """A finding about the file or folder `path` (`rubric tasks check` and the other delivery tools)."""
        return cls(path, line, col, severity, message, code)

    def format(self, source: str) -> str:
        """One line, whatever the keys and values in it contain: tools split lint output on lines."""
        where = f"{source}:{self.line}:{self.col}" if self.line else source
        field = f"{self.path}: " if self.path else ""
        return one_line(f"{where}: {self.severity}: {field}{self.message} [{self.code}]")

    def format_at_path(self) -> str:
        """`path[:line:col]: [warning: ]message [code]`, path being the file at fault (the delivery tools' line)."""
        where = f"{self.path}:{self.line}:{self.col or 1}" if self.line else self.path
        prefix = "" if self.severity == ERROR else "warning: "
        return f"{where}: {prefix}{self.message} [{self.code}]"


def has_errors(problems: list[Problem]) -> bool:
    return any(p.severity == ERROR for p in problems)


def one_line(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class RubricError(ValueError):
    """A rubric that cannot be used; `problems` holds every error found, not just the first."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.format(source) for p in problems))
