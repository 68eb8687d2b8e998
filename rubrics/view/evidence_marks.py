"""Which parts of a trajectory an item's evidence came from.

Evidence is prose written by the checks ("email #1 to cfo@acme.test ... attachment '*MIS*'", "found 48.2L after
'total travel spend'") or by the judge (its rationale). It names emails by number and quotes what it found, so a
part is marked for an item when the evidence cites its email number or quotes a fragment the part contains. A
judge's statement ("the judge read final_answer: met at 0.73 (threshold 0.5)") quotes nothing
and marks nothing; what follows it (the facts found, the rationale) is searched.
"""
from __future__ import annotations

import re

from rubrics.result import Result
from rubrics.view.trajectories import TrajectoryView

_EMAIL_NUMBER = re.compile(r"(?:email|message) #(\d+)")
_QUOTED = re.compile(r"'([^'\n]{3,200})'|\"([^\"\n]{3,200})\"")
# Figures with their unit or grouping (48.2L, 4,820,000, 12.5%): specific enough to locate, unlike a bare "1".
_FIGURE = re.compile(r"\d+(?:[.,]\d+)+[A-Za-z%]*|\d+[A-Za-z%]+")
# Glob characters of a check's pattern ('*MIS*') say nothing about where the text is.
_GLOB = re.compile(r"[*?\[\]]")
MAX_NEEDLES = 24
JUDGE_STATEMENT = "the judge read "   # how a judge item's evidence opens (rubrics/grading/scoring.py)


def needles(evidence: str) -> list[str]:
    """The fragments of the evidence worth looking for in the trajectory."""
    if evidence.startswith(JUDGE_STATEMENT):   # its figures are the probability and threshold, not the trajectory's
        evidence = evidence.partition("; ")[2]
    found = []
    for match in _QUOTED.finditer(evidence):
        quoted = match.group(1) or match.group(2) or ""
        pieces = _GLOB.split(quoted)
        # A pattern's literal pieces are short and common ('*MIS*' is "MIS"): only longer ones locate anything.
        shortest = 3 if len(pieces) == 1 else 5
        found += [p.strip() for p in pieces if len(p.strip()) >= shortest]
    found += [m.group() for m in _FIGURE.finditer(evidence) if len(m.group()) >= 4]
    return list(dict.fromkeys(found))[:MAX_NEEDLES]


def mark(view: TrajectoryView, result: Result) -> TrajectoryView:
    """The view with each part's marks: the items (in the result's order) whose evidence points at it."""
    marks: list[list[str]] = [[] for _ in view.parts]
    for item in result.items:
        evidence = item.evidence or ""
        cited = {int(n) for n in _EMAIL_NUMBER.findall(evidence)}
        wanted = needles(evidence)
        for index, part in enumerate(view.parts):
            if (part.number in cited and part.kind == "email") or any(w in part.text for w in wanted):
                marks[index].append(item.id)
    return view.model_copy(update={"parts": [p.model_copy(update={"marks": m}) for p, m in zip(view.parts, marks)]})
