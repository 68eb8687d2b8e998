"""Judge requests grouped by judge and verdicts split back: the one dispatch path of the sync scorer
(rubrics/grading/scoring.py) and the async one (rubrics/grading/async_scoring.py).

Every job of a batch that asks the same judge object joins one JudgeCall: its requests end to end, in job order
(so the engine shares the instructions across rubrics and each trajectory's context across its items). Whoever
calls the judge (call_judge at once, or a JudgeBatcher that joins other callers' requests) hands each call's
verdicts back to `split_back`, which gives every job its own, in its requests' order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from rubrics.judges.protocol import Judge, JudgeRequest, Verdict


class Asking(Protocol):
    """A job waiting for verdicts (rubrics.grading.scoring.Prepared): its judge and its requests."""
    judge: Judge | None
    requests: list[JudgeRequest]


@dataclass
class JudgeCall:
    """The jobs that ask one judge, in job order, answered in one call."""
    judge: Judge
    askers: list[Asking] = field(default_factory=list)

    @property
    def requests(self) -> list[JudgeRequest]:
        return [request for asker in self.askers for request in asker.requests]


def group_by_judge(prepared: Sequence[Asking]) -> list[JudgeCall]:
    """One JudgeCall per distinct judge object, in the order each first appears; jobs without requests ask none."""
    calls: dict[int, JudgeCall] = {}
    for asker in prepared:
        if asker.requests:
            calls.setdefault(id(asker.judge), JudgeCall(asker.judge)).askers.append(asker)   # type: ignore[arg-type]
    return list(calls.values())


def split_back(prepared: Sequence[Asking], calls: Sequence[JudgeCall],
               answers: Sequence[Sequence[Verdict]]) -> list[list[Verdict]]:
    """Each job's verdicts (one per request, in order; none for a job without requests), from each call's
    verdicts (answers[i] for calls[i], one per request of the call)."""
    verdicts: dict[int, list[Verdict]] = {}
    for call, answered in zip(calls, answers, strict=True):
        stream = iter(answered)
        for asker in call.askers:
            verdicts[id(asker)] = [next(stream) for _ in asker.requests]
    return [verdicts.get(id(asker), []) for asker in prepared]
