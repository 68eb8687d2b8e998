"""Problems found in a rubric, located by file, line, column and field path."""
from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"


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
    path: str           # field path, e.g. "criteria[4].points"; "" for the whole document
    line: int           # 1-based; 0 when unknown (a rubric given as a dict)
    col: int
    severity: str       # "error" | "warning"
    message: str
    code: str           # stable identifier, e.g. "duplicate-id"

    def format(self, source: str) -> str:
        """One line, whatever the keys and values in it contain: tools split lint output on lines."""
        where = f"{source}:{self.line}:{self.col}" if self.line else source
        field = f"{self.path}: " if self.path else ""
        return one_line(f"{where}: {self.severity}: {field}{self.message} [{self.code}]")


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
