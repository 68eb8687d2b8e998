"""negation: the item written as a statement, against the same statement negated, after the evidence.

raw score = log P(" flags X." | evidence) / tokens - log P(" does not flag X." | evidence) / tokens, read after
the assistant turn opens with "The agent's work". The likelihood method compares the statement with itself
under content-free evidence; this one compares it with its negation under the same evidence, so how common the
item's words are cancels inside one prompt. The prompt never shows the item (as in likelihood).
"""
from __future__ import annotations

from rubrics.judges.methods.base import Calibration, JudgeMethod, PromptSpec, ScoredPrompt
from rubrics.judges.methods.statement import INSTRUCTIONS, QUESTION
from rubrics.judges.methods.statements import negation_parts
from rubrics.judges.prompts import Piece, untrusted
from rubrics.judges.protocol import JudgeItem

CALIBRATION = Calibration()


class NegationMethod(JudgeMethod):
    name = "negation"
    description = "negation: the item as a statement against its negation, after the evidence"
    default_calibration = CALIBRATION

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        lead_in, statement, negated = negation_parts(item.criterion)
        return [PromptSpec(INSTRUCTIONS, (Piece("\n"), Piece(QUESTION)), (untrusted(statement), untrusted(negated)),
                           lead_in=lead_in)]

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        (statement, negated), (statement_tokens, negated_tokens) = scored[0].logprobs, scored[0].choice_tokens
        return statement / max(1, statement_tokens) - negated / max(1, negated_tokens)
