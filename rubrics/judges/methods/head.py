"""head: a verdict head trained on labels (`rubric judge-train`) reads the judge model's hidden state at the answer
position of the choice method's prompt, with the choice method's raw score beside it.

The prompt is the choice method's, so a head costs the same model work as choice; the engine hands back the hidden
state of the head's layer at the prompt's last token. raw score = the head's logit, already fitted on labels, so the
method's calibration is the identity. Only the embedded judge runs it (a chat server shows no hidden states), and
only with a head: `rubric grade --method head --head FILE`, `judge: {head: FILE}` in a rubric, or
`EmbeddedJudge(method="head", head=FILE)`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rubrics.judges.methods.base import Calibration, JudgeMethod, PromptSpec, ScoredPrompt
from rubrics.judges.methods.choice import ChoiceMethod
from rubrics.judges.protocol import JudgeItem


class HeadMethod(JudgeMethod):
    name = "head"
    # its prompt is the choice method's: bump it with choice's, and when what the head reads changes
    layout_version = "2026-11-30.1"
    description = "head: a verdict head trained on labels, over the model's hidden state (rubric judge-train)"

    def __init__(self, calibration: Calibration | None = None, head: Any = None):
        super().__init__(calibration)
        if head is None:
            raise ValueError("method 'head' needs a verdict head: rubric grade --head FILE, judge: {head: FILE} in "
                             "the rubric, or EmbeddedJudge(head=FILE); `rubric judge-train` trains one")
        self.head = head   # a VerdictHead, or a HeadProbe (training: the states of several layers, no verdict)

    @classmethod
    def with_calibrations(cls, calibrations: Mapping[str, Calibration], head: Any = None) -> "HeadMethod":
        return cls(calibrations.get(cls.name), head)

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        return [replace(spec, hidden_layers=tuple(self.head.layers)) for spec in ChoiceMethod().prompts(item)]

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        choice_raw = ChoiceMethod().raw_score(item, scored)
        if not hasattr(self.head, "logit"):
            raise ValueError("method 'head' has layers to read but no trained head (rubric judge-train)")
        return self.head.logit(scored[0].hidden[0], choice_raw)

    def explain(self, item: JudgeItem, raw: float, probability: float, scored: list[ScoredPrompt]) -> str | None:
        yes, no = scored[0].logprobs
        return f"head logit {raw:+.3f} (layer {self.head.layer}; choice log P(Yes) - log P(No) = {yes - no:+.3f})"
