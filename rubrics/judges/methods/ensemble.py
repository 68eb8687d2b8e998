"""ensemble: the mean of several methods' calibrated logits.

Each member method builds and scores its own prompts (the engine batches them together and shares their
prefixes); the raw score is the mean over members of scale * raw + offset with each member's own calibration.
Methods built differently make different mistakes (the likelihood of a statement, a statement against its
negation, a direct question), so their mean is steadier than any one of them.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rubrics.judges.methods.base import Calibration, JudgeMethod, PromptSpec, ScoredPrompt
from rubrics.judges.protocol import JudgeItem

CALIBRATION = Calibration()


class EnsembleMethod(JudgeMethod):
    name = "ensemble"
    description = "ensemble: the mean of the calibrated logits of likelihood, negation and question"
    default_calibration = CALIBRATION
    members: ClassVar[tuple[str, ...]] = ("likelihood", "negation", "question")

    def __init__(self, calibration: Calibration | None = None,
                 member_calibrations: Mapping[str, Calibration] | None = None):
        from rubrics.judges.methods import make_method

        super().__init__(calibration)
        self.parts = [make_method(name, member_calibrations) for name in self.members]

    @classmethod
    def with_calibrations(cls, calibrations: Mapping[str, Calibration]) -> "EnsembleMethod":
        return cls(calibrations.get(cls.name), calibrations)

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        return [spec for part in self.parts for spec in part.prompts(item)]

    def member_scores(self, item: JudgeItem, scored: list[ScoredPrompt]) -> list[float]:
        """Each member's calibrated logit."""
        logits, position = [], 0
        for part in self.parts:
            count = len(part.prompts(item))
            raw = part.raw_score(item, scored[position:position + count])
            logits.append(part.calibration.scale * raw + part.calibration.offset)
            position += count
        return logits

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        logits = self.member_scores(item, scored)
        return sum(logits) / len(logits)

    def explain(self, item: JudgeItem, raw: float, probability: float, scored: list[ScoredPrompt]) -> str:
        logits = self.member_scores(item, scored)
        parts = ", ".join(f"{part.name} {logit:+.2f}" for part, logit in zip(self.parts, logits))
        return f"ensemble p={probability:.3f} (threshold {item.threshold}): mean of calibrated logits ({parts})"
