"""The judge protocol: a batch of requests in, one verdict per request out.

The scorer only speaks this protocol, so the embedded engine judge, an HTTP judge or a test fake
plug in without the scorer knowing which one it has.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class EvidenceBlock:
    name: str   # the selector it came from, e.g. "final_answer"
    text: str   # untrusted trajectory text; the prompt builder fences it


@dataclass(frozen=True)
class JudgeExample:
    evidence: str
    met: bool


@dataclass(frozen=True)
class JudgeRequest:
    key: str                 # f"{trajectory_id}::{item_id}", unique within one call
    trajectory_id: str
    item_id: str
    kind: str                # "gate" | "criterion"
    points: int | None
    criterion: str           # the judge TEXT
    penalty: bool            # True for negative points: asks whether the behaviour occurred
    task: str
    reference: str | None
    evidence: tuple[EvidenceBlock, ...]
    threshold: float = 0.5
    method: str | None = None    # "choice" | "likelihood" | None (judge default)
    mode: str = "direct"         # "direct" | "reasoned"
    max_tokens: int = 128        # for reasoned mode
    examples: tuple[JudgeExample, ...] = ()


@dataclass(frozen=True)
class Verdict:
    met: bool | None            # None when error
    probability: float | None
    rationale: str | None = None
    error: str | None = None


@runtime_checkable
class Judge(Protocol):
    name: str

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """Same order and length as requests; one bad request gets an error verdict, never an exception."""
        ...
