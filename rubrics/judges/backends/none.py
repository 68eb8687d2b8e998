"""Judges that evaluate nothing, so judge items are reported as not evaluated instead of silently unmet."""
from __future__ import annotations

from typing import Sequence

from rubrics.judges.protocol import JudgeRequest, Verdict


class UnavailableJudge:
    """Answers every request with an error verdict carrying `reason`."""

    def __init__(self, reason: str, name: str = "unavailable"):
        self.reason = reason
        self.name = name

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return [Verdict(met=None, probability=None, error=self.reason) for _ in requests]


class NoJudge(UnavailableJudge):
    """The judge of `rubric grade --judge none`."""

    def __init__(self):
        super().__init__("not evaluated: no judge configured (--judge none)", name="none")
