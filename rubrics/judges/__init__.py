"""Judges: the protocol, plus NoJudge. The embedded and HTTP judges live in their own modules and are
imported only when asked for, so that importing this package never pulls torch or httpx."""
from rubrics.judges.backends.none import NoJudge, UnavailableJudge
from rubrics.judges.protocol import EvidenceBlock, Judge, JudgeContext, JudgeExample, JudgeItem, JudgeRequest, Verdict

__all__ = ["EvidenceBlock", "Judge", "JudgeContext", "JudgeExample", "JudgeItem", "JudgeRequest", "Verdict", "NoJudge",
           "UnavailableJudge"]
