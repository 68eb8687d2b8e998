"""Problems found in a rubric (located by file, line, column and field path) or in a delivery's files."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
# A word this long that begins exactly one candidate names it ("smollm" for smollm2-135m-instruct), though too
# short beside it for difflib's ratio; shorter ones ("fi") begin too many things to be read as a name.
MIN_PREFIX = 3


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


def did_you_mean(word: str, candidates) -> str:
    """The hint " (did you mean 'X'?)" for the candidate closest to word (a typo of it, or the start of it and of
    no other), else "": the one did-you-mean of every message that refuses a name (rubric keys, selectors, catalog
    models), so that they all suggest alike."""
    folded: dict[str, str] = {}   # case aside ("In" for in, "SmolLM2" for smollm2-...): lowered -> as written
    for name in candidates:
        folded.setdefault(str(name).lower(), str(name))
    word = str(word).lower()   # a YAML key may be a number
    close = difflib.get_close_matches(word, list(folded), n=1, cutoff=0.6) or only_prefix_of(word, list(folded))
    return f" (did you mean '{folded[close[0]]}'?)" if close else ""


def only_prefix_of(word: str, names: list[str]) -> list[str]:
    """[the one name that word begins], or [] when it begins none or several."""
    if len(word) < MIN_PREFIX:
        return []
    starting = [name for name in names if name.startswith(word)]
    return starting if len(starting) == 1 else []


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
