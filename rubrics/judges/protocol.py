"""The judge protocol: a batch of requests in, one verdict per request out.

The scorer only speaks this protocol, so the embedded engine judge, an HTTP judge or a test fake
plug in without the scorer knowing which one it has. A request is a pointer to the context it is
judged in (one trajectory's task, reference and evidence, built once by the compiler and shared by
all of that trajectory's items) plus the item itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from rubrics.judges.usage import JudgeUsage


@dataclass(frozen=True)
class EvidenceBlock:
    name: str   # the selector it came from, e.g. "final_answer"
    text: str   # untrusted trajectory text; the prompt builder fences it
    missing: str | None = None   # the selector found nothing: what the trajectory lacks (text then says so)


@dataclass(frozen=True)
class JudgeContext:
    """What every item of one trajectory is judged in: the prompt prefix its items share."""
    trajectory_id: str
    task: str
    reference: str | None
    evidence: tuple[EvidenceBlock, ...]

    @property
    def missing(self) -> str | None:
        """What the trajectory lacks when none of the selectors found anything (then no judge is asked: the item
        is unmet, as a code check is on missing data); None when some evidence exists."""
        if self.evidence and all(block.missing for block in self.evidence):
            return "; ".join(f"{block.name}: {block.missing}" for block in self.evidence)
        return None


@dataclass(frozen=True)
class JudgeExample:
    evidence: str
    met: bool


@dataclass(frozen=True)
class JudgeItem:
    """One rubric item as the judge sees it, with its compiled judge options."""
    id: str
    kind: str                # "gate" | "criterion"
    points: int | None
    criterion: str           # the judge TEXT
    penalty: bool = False    # True for negative points: asks whether the behaviour occurred
    examples: tuple[JudgeExample, ...] = ()
    threshold: float = 0.5
    method: str | None = None    # a name in rubrics.judges.methods.METHODS; None: the judge's default
    mode: str = "direct"         # "direct" | "reasoned"
    max_tokens: int = 128        # the rationale's budget in reasoned mode
    samples: int = 1             # reasoned mode: rationales drawn, their verdicts averaged (1: one greedy one)

    @property
    def tag(self) -> str:
        """How the prompt shows the item's sign: [gate], [+3], [-2]."""
        if self.kind == "gate" or self.points is None:
            return "[gate]"
        return f"[{self.points:+d}]"


@dataclass(frozen=True)
class JudgeRequest:
    context: JudgeContext
    item: JudgeItem


@dataclass(frozen=True)
class PairContext:
    """Two attempts at one task, shown side by side: the task and reference once, then each attempt's evidence
    (the same selectors for both). `first` is shown as attempt A, `second` as attempt B."""
    first: JudgeContext
    second: JudgeContext

    @property
    def task(self) -> str:
        return self.first.task

    @property
    def reference(self) -> str | None:
        return self.first.reference


@dataclass(frozen=True)
class ComparisonRequest:
    """Which of two attempts meets the item better (for a penalty: which one did the bad thing more clearly). The
    verdict's probability is the judge's probability that the first attempt (A) is the one; `met` is whether it
    is at least 0.5. Group grading asks each pair in both orders, so that a preference for a position cancels."""
    context: PairContext
    item: JudgeItem


class MemberVerdict(BaseModel):
    """One panel member's verdict on an item."""
    model_config = ConfigDict(frozen=True)
    judge: str = Field(description="The member, e.g. embedded:likelihood or openai:MODEL.")
    met: bool | None = Field(description="Null when the member could not judge the item.")
    probability: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Verdict:
    met: bool | None            # None when error
    probability: float | None
    rationale: str | None = None   # what the judge said (reasoned mode), or how a combined verdict was made
    error: str | None = None
    usage: JudgeUsage | None = None     # the model work done for this verdict; None when the judge does not say
    members: tuple[MemberVerdict, ...] = ()   # a panel's verdict: each member's own
    detail: str | None = None   # the numbers the method's verdict rests on (a head's logit, a likelihood's nats)


@runtime_checkable
class Judge(Protocol):
    name: str

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """Same order and length as requests; one bad request gets an error verdict, never an exception."""
        ...


@runtime_checkable
class ComparingJudge(Judge, Protocol):
    """A judge that can also compare two attempts side by side (rubrics.score_group uses it)."""

    def compare(self, requests: Sequence[ComparisonRequest]) -> list[Verdict]:
        """Same order and length as requests; one bad request gets an error verdict, never an exception."""
        ...


def concurrent_calls(judge: Judge) -> int:
    """How many judge() calls the judge takes at once: its `concurrent_calls` attribute, or 1 (a judge that says
    nothing is called by one thread at a time). The embedded judge takes several: calls made while another runs
    join its engine batches."""
    value = getattr(judge, "concurrent_calls", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def call_judge(judge: Judge, requests: list) -> list[Verdict]:
    """The judge's verdicts, or one error verdict per request when the judge as a whole fails."""
    from rubrics.judges.extras import explain_missing

    if not requests:
        return []
    try:
        verdicts = list(judge.judge(requests))
    except Exception as exc:
        explained = explain_missing(exc)
        reason = str(explained) if explained else f"judge '{getattr(judge, 'name', judge)}' failed: " \
                                                  f"{type(exc).__name__}: {exc}"
        return [Verdict(met=None, probability=None, error=reason) for _ in requests]
    if len(verdicts) != len(requests):
        reason = f"judge returned {len(verdicts)} verdicts for {len(requests)} requests"
        return [Verdict(met=None, probability=None, error=reason) for _ in requests]
    return verdicts
