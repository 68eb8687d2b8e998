"""PanelJudge: several judges answer each request; their verdicts are combined per item.

A member is a judge, optionally with a method it uses on every item (so one embedded judge can sit on the panel
several times, once per method). Members that share one judge object are sent as one call (for the embedded
judge: one engine batch, so the trajectory prefixes and any prompt two methods have in common are computed
once); other members are called one after the other. Each member's verdict is kept on the combined verdict
(ItemResult.members), and their agreement is measured with Fleiss' kappa (rubrics/judges/panel/agreement.py).

combine:
- mean_logit: the probability is the sigmoid of the members' mean logit (probabilities clipped to
  [1e-6, 1 - 1e-6] first, so one certain member cannot swamp the others); met when it reaches the item's
  threshold.
- majority: met when more than half of the members that answered say met; the probability is the share that
  said met; a tie is decided by the mean-logit probability against the threshold.
A member that fails on an item is left out of that item's combination (and shown with its error); the item is
an error only when no member answered.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from rubrics.judges.protocol import Judge, JudgeRequest, MemberVerdict, Verdict, call_judge
from rubrics.judges.usage import total_usage

Combine = Literal["mean_logit", "majority"]
COMBINES: tuple[str, ...] = ("mean_logit", "majority")
_CLIP = 1e-6


@dataclass(frozen=True)
class PanelMember:
    judge: Judge
    method: str | None = None   # used on every item, over the item's own; None: the item's or the judge's default
    label: str | None = None    # how results name the member; default: the judge's name, then ':' and the method

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        return f"{self.judge.name}:{self.method}" if self.method else self.judge.name


class PanelJudge:
    """PanelJudge([judge or PanelMember, ...], combine="mean_logit"|"majority"): a judge of judges."""

    def __init__(self, members: Sequence[Judge | PanelMember], combine: Combine = "mean_logit"):
        self.members = [m if isinstance(m, PanelMember) else PanelMember(m) for m in members]
        if len(self.members) < 2:
            raise ValueError(f"a panel needs at least two members, got {len(self.members)}")
        if combine not in COMBINES:
            raise ValueError(f"combine: expected one of {', '.join(COMBINES)}, got {combine!r}")
        self.combine = combine
        self.member_names = _unique([m.name for m in self.members])
        self.name = f"panel[{self.combine}]({', '.join(self.member_names)})"
        self.progress: Any = None   # passed to the members' judges that show progress

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        by_member = self._member_verdicts(requests)
        return [self._combined(request, [verdicts[i] for verdicts in by_member])
                for i, request in enumerate(requests)]

    def _member_verdicts(self, requests: Sequence[JudgeRequest]) -> list[list[Verdict]]:
        """verdicts[m][i]: member m on request i. Members sharing a judge go in one call."""
        verdicts: list[list[Verdict]] = [[] for _ in self.members]
        for judge, indexes in _by_judge(self.members):
            asked = [_as_member(request, self.members[m]) for m in indexes for request in requests]
            if hasattr(judge, "progress"):
                judge.progress = self.progress
            answers = call_judge(judge, asked)
            for position, m in enumerate(indexes):
                verdicts[m] = answers[position * len(requests):(position + 1) * len(requests)]
        return verdicts

    def _combined(self, request: JudgeRequest, verdicts: list[Verdict]) -> Verdict:
        members = tuple(MemberVerdict(judge=name, met=v.met if v.error is None else None,
                                      probability=v.probability if v.error is None else None, error=v.error)
                        for name, v in zip(self.member_names, verdicts))
        reported = [v.usage for v in verdicts if v.usage is not None]
        usage = total_usage(reported) if reported else None
        answered = [v for v in verdicts if v.error is None and v.met is not None and v.probability is not None]
        if not answered:
            reasons = "; ".join(f"{m.judge}: {m.error or 'no verdict'}" for m in members)
            return Verdict(met=None, probability=None, error=f"no panel member could judge the item ({reasons})",
                           usage=usage, members=members)
        threshold = request.item.threshold
        mean = mean_logit_probability([v.probability for v in answered])
        if self.combine == "mean_logit":
            met, probability = mean >= threshold, mean
        else:
            yes = sum(1 for v in answered if v.met)
            probability = yes / len(answered)
            met = yes * 2 > len(answered) or (yes * 2 == len(answered) and mean >= threshold)
        return Verdict(met=met, probability=probability, rationale=self._rationale(members, len(answered)),
                       usage=usage, members=members)

    def _rationale(self, members: tuple[MemberVerdict, ...], answered: int) -> str:
        votes = ", ".join(f"{m.judge} " + (f"error ({m.error})" if m.error is not None else
                                           f"{'met' if m.met else 'unmet'} {m.probability:.3f}") for m in members)
        return f"panel ({self.combine}, {answered} of {len(members)} answered): {votes}"


def mean_logit_probability(probabilities: Sequence[float]) -> float:
    clipped = [min(max(p, _CLIP), 1.0 - _CLIP) for p in probabilities]
    mean = sum(math.log(p / (1.0 - p)) for p in clipped) / len(clipped)
    return 1.0 / (1.0 + math.exp(-mean))


def _as_member(request: JudgeRequest, member: PanelMember) -> JudgeRequest:
    if member.method is None:
        return request
    return replace(request, item=replace(request.item, method=member.method))


def _by_judge(members: list[PanelMember]) -> list[tuple[Judge, list[int]]]:
    """(judge, indexes of the members that share it), in first-seen order (judges compared by identity)."""
    groups: dict[int, tuple[Judge, list[int]]] = {}
    for index, member in enumerate(members):
        groups.setdefault(id(member.judge), (member.judge, []))[1].append(index)
    return list(groups.values())


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique
