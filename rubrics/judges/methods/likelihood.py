"""likelihood: the statement method's score, minus the same score over content-free evidence.

The raw log-probability of a statement also measures how common its words are (surface form competition,
Holtzman et al. 2021), so this method subtracts the statement's log-probability under content-free evidence
("N/A" in every fence, same task and item): the pointwise mutual information per statement token,

    raw score = (log P(statement | evidence) - log P(statement | content-free)) / tokens(statement)

The content-free prompt is the same for every trajectory of a rubric, so the engine computes it once; it shifts
each item's scores by a constant, so it changes how an item's scores compare with another item's, never the
order of one item's trajectories. A chat server cannot run it.
"""
from __future__ import annotations

from rubrics.judges.methods.base import PromptSpec, ScoredPrompt
from rubrics.judges.methods.statement import StatementMethod, statement_spec
from rubrics.judges.protocol import JudgeItem


class LikelihoodMethod(StatementMethod):
    name = "likelihood"
    # its own, though its prompts are statement's: bump it with statement's, and when its baseline changes
    layout_version = "2026-11-30.1"
    description = "likelihood: PMI of the item written as a statement, evidence vs content-free evidence"

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        # The content-free baseline first: it is shared by every trajectory of the rubric.
        return [statement_spec(item, content_free=True), statement_spec(item)]

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        baseline, evidence = scored
        return (evidence.logprobs[0] - baseline.logprobs[0]) / max(1, evidence.choice_tokens[0])

    def explain(self, item: JudgeItem, raw: float, probability: float, scored: list[ScoredPrompt]) -> str:
        return (f"likelihood p={probability:.3f} (threshold {item.threshold}): the evidence moves the item's "
                f"statement by {raw:+.3f} nats/token against content-free evidence")
