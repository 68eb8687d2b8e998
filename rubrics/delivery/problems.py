"""One finding of `rubric tasks check`: where it is, what is wrong, and how bad."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    path: str                 # the file or folder at fault, as the user named it
    message: str
    code: str                 # stable slug, so that tests and CI filters need not match prose
    severity: Severity = "error"
    line: int | None = None   # 1-based, for findings inside task.yaml
    column: int | None = None

    def format(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}:{self.column or 1}"
        prefix = "" if self.severity == "error" else "warning: "
        return f"{where}: {prefix}{self.message} [{self.code}]"


def has_errors(problems: list[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)
