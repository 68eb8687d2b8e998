"""Rubric -> Plan: the code checks to run and the judge requests to send, per trajectory.

The plan is built once per rubric; `judge_requests(trajectory)` fills in the evidence. Requests of one
trajectory come out in item order with the evidence blocks in the same order, so the prompts built
from them share a long prefix that the engine's prefix cache can reuse.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rubrics.judges.protocol import EvidenceBlock, JudgeExample, JudgeRequest
from rubrics.model import DEFAULT_EVIDENCE, Item, JudgeOptions, Rubric

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
    criterion: str
    evidence: tuple[str, ...]   # selectors
    threshold: float
    method: str | None
    mode: str
    max_tokens: int
    examples: tuple[JudgeExample, ...]


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
        from rubrics.selectors import select

        cache: dict[str, EvidenceBlock] = {}

        def block(selector: str) -> EvidenceBlock:
            if selector not in cache:
                selection = select(trajectory, selector)
                text = selection.text if not selection.missing else f"[missing: {selection.missing}]"
                cache[selector] = EvidenceBlock(selector, text)
            return cache[selector]

        rubric = self.rubric
        return [JudgeRequest(
            key=f"{trajectory.id}::{step.item.id}", trajectory_id=trajectory.id, item_id=step.item.id,
            kind=step.item.kind, points=step.item.points, criterion=step.criterion, penalty=step.item.penalty,
            task=rubric.task, reference=rubric.reference, evidence=tuple(block(s) for s in step.evidence),
            threshold=step.threshold, method=step.method, mode=step.mode, max_tokens=step.max_tokens,
            examples=step.examples) for step in self.judge_steps]


def _first(*values):
    return next((value for value in values if value is not None), None)


def compile_judge(item: Item, rubric: Rubric) -> JudgeStep:
    options: JudgeOptions = item.config
    defaults = rubric.judge
    pick = lambda name: getattr(defaults, name) if defaults else None  # noqa: E731
    evidence = _first(item.evidence, pick("evidence")) or DEFAULT_EVIDENCE
    return JudgeStep(
        item=item, criterion=options.text, evidence=tuple(evidence),
        threshold=_first(options.threshold, item.threshold, pick("threshold"), DEFAULT_THRESHOLD),
        method=_first(options.method, pick("method")),
        mode=_first(options.mode, pick("mode"), DEFAULT_MODE),
        max_tokens=_first(options.max_tokens, pick("max_tokens"), DEFAULT_MAX_TOKENS),
        examples=tuple(JudgeExample(e.evidence, e.met) for e in item.examples))


def compile_code(item: Item) -> CodeStep:
    from rubrics.checks.registry import get_check

    spec = get_check(item.check)
    return CodeStep(item=item, spec=spec, config=spec.config_model.model_validate(item.config))


def compile_rubric(rubric: Rubric) -> Plan:
    steps = [compile_judge(item, rubric) if item.is_judge else compile_code(item) for item in rubric.items]
    return Plan(rubric=rubric, steps=tuple(steps))
