"""What a judge method is: the prompts it needs scored, and how their scores become a verdict.

A method never talks to a model. It says which prompts it wants (PromptSpec, rubrics/judges/prompt/judge_prompt.py:
its instructions, its item segment, the continuations whose log-probabilities it reads, and whether the evidence
is replaced by content-free text), and turns the scored prompts (ScoredPrompt) into a raw score on a logit scale.
A calibration (scale, offset) maps the raw score to the probability that the item is met. The embedded judge and the OpenAI-compatible judge
both run methods this way, so a method behaves the same on either, and `rubric judge-eval --fit-calibration`
can fit any method's calibration.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rubrics.judges.fitted.logistic import sigmoid
from rubrics.judges.prompt.judge_prompt import PromptSpec, Reasoning
from rubrics.judges.protocol import JudgeItem, Verdict

__all__ = ["Calibration", "IDENTITY", "JudgeMethod", "PromptSpec", "Reasoning", "ScoredPrompt"]


@dataclass(frozen=True)
class Calibration:
    """probability = sigmoid(scale * raw score + offset)."""
    scale: float = 1.0
    offset: float = 0.0

    def probability(self, raw: float) -> float:
        return sigmoid(self.scale * raw + self.offset)


IDENTITY = Calibration()


@dataclass(frozen=True)
class ScoredPrompt:
    """What a judge measured for one PromptSpec."""
    logprobs: tuple[float, ...]      # one per choice: the sum of its tokens' log-probabilities
    choice_tokens: tuple[int, ...]   # how many tokens each choice has
    rationale: str | None = None     # the generated rationale (reasoned mode)
    hidden: Any = None               # PromptSpec.hidden_layers: a float32 tensor [layers, hidden size], else None


class JudgeMethod:
    """Base of every method. Subclasses set name, layout_version and over_http and write prompts() and
    raw_score()."""

    name: ClassVar[str]
    # The version of this method's prompts: its instructions, item segment, lead-in, answers and baselines, and the
    # shared segments (rubrics/judges/prompt/prompts.py) as it uses them. Fitted files (calibrations, heads:
    # rubrics/judges/fitted/fitted_file.py) record it and are refused once it changes, so fitted numbers are never applied
    # to prompts they were not fitted on. Each method declares its own, so editing one method's prompts bumps only
    # its version and refuses only the files fitted for it. tests/rubrics/test_calibration_file.py pins each
    # method's version to a fingerprint of its prompts.
    layout_version: ClassVar[str]
    # True when a chat-completions server can run it: one prompt, no assistant lead-in, and single-token answers
    # that its top log-probabilities show.
    over_http: ClassVar[bool] = False
    description: ClassVar[str] = ""
    # A method knows no model: raw scores are calibrated per model (rubrics/judges/fitted/judge_models.py ships each
    # catalog model's fits), so a method alone is uncalibrated.
    default_calibration: ClassVar[Calibration] = IDENTITY

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A class that names a method says which prompts its fitted files are for: one inherited from its parent
        # would let the subclass's own prompts pass for the parent's (likelihood builds on statement, yet its
        # files are its own).
        if "name" in cls.__dict__ and "layout_version" not in cls.__dict__:
            raise TypeError(f"judge method {cls.__dict__['name']!r} ({cls.__qualname__}) declares no layout_version "
                            "of its own: the version of its prompts that calibration and head files record "
                            "(e.g. layout_version = \"2026-11-30.1\"; bump it whenever its prompts change)")

    def __init__(self, calibration: Calibration | None = None):
        self.calibration = calibration or self.default_calibration

    @classmethod
    def with_calibrations(cls, calibrations: Mapping[str, Calibration], head: Any = None) -> "JudgeMethod":
        """The method with its calibration taken from {method name: Calibration} (its default when absent). head:
        the judge's verdict head (rubrics.judges.fitted.verdict_head), which only the head method reads."""
        return cls(calibrations.get(cls.name))

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        raise NotImplementedError

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        """Evidence for 'met' on a logit scale, from the scored prompts in the order prompts() gave them."""
        raise NotImplementedError

    def explain(self, item: JudgeItem, raw: float, probability: float, scored: list[ScoredPrompt]) -> str | None:
        """The numbers the verdict rests on, beyond its probability (the result's judge_detail); None: nothing more."""
        return None

    def verdict(self, item: JudgeItem, scored: list[ScoredPrompt]) -> Verdict:
        raw = self.raw_score(item, scored)
        probability = self.calibration.probability(raw)
        return Verdict(met=probability >= item.threshold, probability=probability,
                       rationale=next((s.rationale for s in scored if s.rationale), None),
                       detail=self.explain(item, raw, probability, scored))
