"""A judge item's facts (`judge: {facts: [...]}`), looked up in the evidence its request shows the judge.

The scorer asks this before the judge: an item with a missing fact is decided unmet on the spot (a penalty then
does not apply, a gate fails), with the missing fact named in its evidence; an item whose facts are all found goes
to the judge, and its result's evidence says where each fact was found.
"""
from __future__ import annotations

from rubrics.checks.facts import EvidenceText, FactsOutcome, match_facts
from rubrics.judges.protocol import JudgeContext
from rubrics.result import ItemResult
from rubrics.rubric.compiler import JudgeStep


class FactFinder:
    """Facts of the items of one trajectory: each evidence block prepared for matching once, however many items
    look in it."""

    def __init__(self):
        self._texts: dict[int, EvidenceText] = {}

    def outcome(self, step: JudgeStep, context: JudgeContext) -> FactsOutcome:
        blocks = [self._text(block) for block in context.evidence if not block.missing]
        return match_facts(step.facts, blocks)

    def _text(self, block) -> EvidenceText:
        key = id(block)
        if key not in self._texts:
            self._texts[key] = EvidenceText(block.name, block.text)
        return self._texts[key]


def missing_facts_result(step: JudgeStep, outcome: FactsOutcome) -> ItemResult:
    """Unmet without asking the judge: a fact the item depends on is not in its evidence."""
    item = step.item
    return ItemResult(id=item.id, kind=item.kind, text=item.label or None, points=item.points, method="judge",
                      tags=list(item.tags), status="unmet", evidence=outcome.describe(),
                      facts_missing=[fact.shown for fact in outcome.missing])
