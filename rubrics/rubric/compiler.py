"""Rubric -> Plan: the code checks to run and the judge requests to send, per trajectory.

The plan is built once per rubric; `judge_requests(trajectory)` selects the evidence. Each distinct evidence
list of a trajectory becomes one JudgeContext, built once and shared by the items that show it; requests come
out in item order, so the prompts built from them share a long prefix that the engine's prefix cache reuses.
An item with `facts:` carries their matchers (rubrics/checks/facts.py); the scorer looks them up in the request's
evidence before asking the judge. An item with `parts:` sends one request per part (ids "ITEM#1", "ITEM#2", ...), which the scorer combines back
into the item's verdict (rubrics/grading/parts.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rubrics.checks.facts import Fact, compile_fact
from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeExample, JudgeItem, JudgeRequest
from rubrics.rubric.spec import DEFAULT_EVIDENCE, DEFAULT_UNCERTAIN, Band, Item, JudgeOptions, Rubric

DEFAULT_THRESHOLD = 0.5
DEFAULT_MODE = "direct"
DEFAULT_MAX_TOKENS = 128


@dataclass(frozen=True)
class CodeStep:
    item: Item
    spec: Any          # the CheckSpec of item.check
    config: Any        # the validated config model instance


@dataclass(frozen=True)
class JudgeStep:
    item: Item
    judge: JudgeItem              # what the judge is asked, with the item's resolved judge options
    evidence: tuple[str, ...]     # selectors
    uncertain: Band = DEFAULT_UNCERTAIN   # kept here, not on JudgeItem: the scorer flags items, judges never see it
    parts: tuple[JudgeItem, ...] = ()     # `parts:`: each asked on its own; the item is met when every one is
    facts: tuple[Fact, ...] = ()          # `facts:`: all found in the evidence, or the item is unmet unasked

    @property
    def threshold(self) -> float:
        return self.judge.threshold

    @property
    def asked(self) -> tuple[JudgeItem, ...]:
        """What the judge is asked for this item: its parts, or the item itself."""
        return self.parts or (self.judge,)


@dataclass(frozen=True)
class Plan:
    rubric: Rubric
    steps: tuple[CodeStep | JudgeStep, ...]   # item order: gates, then criteria

    @property
    def judge_steps(self) -> tuple[JudgeStep, ...]:
        return tuple(step for step in self.steps if isinstance(step, JudgeStep))

    @property
    def needs_judge(self) -> bool:
        return bool(self.judge_steps)

    def judge_requests(self, trajectory) -> list[JudgeRequest]:
        from rubrics.trajectory.selectors import select

        blocks: dict[str, EvidenceBlock] = {}
        contexts: dict[tuple[str, ...], JudgeContext] = {}

        def block(selector: str) -> EvidenceBlock:
            if selector not in blocks:
                selection = select(trajectory, selector)
                text = selection.text if not selection.missing else f"[missing: {selection.missing}]"
                blocks[selector] = EvidenceBlock(selector, text, selection.missing)
            return blocks[selector]

        def context(selectors: tuple[str, ...]) -> JudgeContext:
            if selectors not in contexts:
                contexts[selectors] = JudgeContext(trajectory.id, self.rubric.task, self.rubric.reference,
                                                   tuple(block(s) for s in selectors))
            return contexts[selectors]

        return [JudgeRequest(context(step.evidence), asked) for step in self.judge_steps for asked in step.asked]


def _first(*values):
    return next((value for value in values if value is not None), None)


def compile_judge(item: Item, rubric: Rubric, uncertain: Band | None = None) -> JudgeStep:
    """The item's judge options resolved: the item, then the rubric's `judge:` defaults, then the built-ins.
    `uncertain` (the CLI's --uncertain) sits between the item and the rubric: it overrides the rubric's band,
    not a band the item sets for itself."""
    options: JudgeOptions = item.config
    defaults = rubric.judge
    pick = lambda name: getattr(defaults, name) if defaults else None  # noqa: E731
    evidence = _first(item.evidence, pick("evidence")) or DEFAULT_EVIDENCE
    judge = JudgeItem(
        id=item.id, kind=item.kind, points=item.points, criterion=options.text, penalty=item.penalty,
        examples=tuple(JudgeExample(e.evidence, e.met) for e in item.examples),
        threshold=_first(options.threshold, item.threshold, pick("threshold"), DEFAULT_THRESHOLD),
        method=_first(options.method, pick("method")),
        mode=_first(options.mode, pick("mode"), DEFAULT_MODE),
        max_tokens=_first(options.max_tokens, pick("max_tokens"), DEFAULT_MAX_TOKENS),
        samples=_first(options.samples, pick("samples"), 1))
    band = _first(options.uncertain, uncertain, pick("uncertain"), DEFAULT_UNCERTAIN)
    # a part is the item's question with the part's text; the item's examples decide the whole item, not a part
    parts = tuple(replace(judge, id=part_id(item.id, number), criterion=text, examples=())
                  for number, text in enumerate(options.parts or (), start=1))
    facts = tuple(compile_fact(fact) for fact in options.facts or ())
    return JudgeStep(item=item, judge=judge, evidence=tuple(evidence), uncertain=tuple(band), parts=parts,
                     facts=facts)


def part_id(item_id: str, number: int) -> str:
    """The request id of an item's part: "ITEM#N" (a "#" cannot occur in an item id)."""
    return f"{item_id}#{number}"


def item_id_of(request_id: str) -> str:
    """The item a request asks about: the item's own id, or the item of a part's "ITEM#N"."""
    return request_id.split("#", 1)[0]


def compile_code(item: Item) -> CodeStep:
    from rubrics.checks.registry import get_check

    spec = get_check(item.check)
    return CodeStep(item=item, spec=spec, config=spec.config_model.model_validate(item.config))


def compile_rubric(rubric: Rubric, uncertain: Band | None = None) -> Plan:
    """`uncertain`: a band that overrides the rubric's default one (items that set their own keep it)."""
    steps = [compile_judge(item, rubric, uncertain) if item.is_judge else compile_code(item) for item in rubric.items]
    return Plan(rubric=rubric, steps=tuple(steps))
