"""`judge: {text: ..., parts: [...]}`: an item judged part by part, met when every part is.

The compiled plan asks one question per part; the scorer combines the parts' verdicts into the item's (unmet as
soon as one part is unmet, an error when none is unmet but one failed, met otherwise; the lowest part's
probability). Then the real path: the embedded judge (the tiny test model) on a rubric with parts, each part's
probability the one the same question gets as an item of its own."""
from __future__ import annotations

import pytest
from rubric_fakes import ScriptedJudge, trajectory, yaml_text

import rubrics
from judge_models import tiny_judge_model
from rubrics.judges.protocol import Verdict
from rubrics.rubric.compiler import compile_rubric
from rubrics.rubric.load import RubricError, load_rubric

RUBRIC = yaml_text("""
    version: 1
    id: parts
    task: Refund the order and tell the customer.
    criteria:
      - id: refund-and-email
        points: 2
        examples: [{evidence: "Refunded $42, emailed R-1.", met: true}]
        judge:
          text: The agent refunded $42 and emailed the customer the confirmation number.
          parts:
            - The agent refunded exactly $42.
            - The agent emailed the customer the confirmation number.
          threshold: 0.6
      - {id: polite, points: 1, judge: The reply is polite.}
""")


def by_text(answers: dict[str, Verdict]) -> ScriptedJudge:
    return ScriptedJudge(lambda request: answers[request.item.criterion])


def refund_result(answers: dict[str, Verdict]):
    answers = {"The reply is polite.": Verdict(met=True, probability=0.9), **answers}
    result = rubrics.score(trajectory("Refunded $42."), RUBRIC, judge=by_text(answers))
    return next(item for item in result.items if item.id == "refund-and-email")


def test_each_part_is_one_request_with_the_items_options_and_its_own_text():
    plan = compile_rubric(load_rubric(RUBRIC))
    asked = [request.item for request in plan.judge_requests(rubrics.load_trajectory(trajectory("x")))]
    assert [a.id for a in asked] == ["refund-and-email#1", "refund-and-email#2", "polite"]
    assert [a.criterion for a in asked[:2]] == ["The agent refunded exactly $42.",
                                               "The agent emailed the customer the confirmation number."]
    assert {(a.threshold, a.points, a.kind, a.examples) for a in asked[:2]} == {(0.6, 2, "criterion", ())}


def test_the_item_is_met_when_every_part_is_with_the_lowest_probability():
    item = refund_result({"The agent refunded exactly $42.": Verdict(met=True, probability=0.9),
                          "The agent emailed the customer the confirmation number.": Verdict(met=True,
                                                                                               probability=0.7)})
    assert (item.status, item.probability) == ("met", 0.7)
    assert "part 1 (met, 0.900): The agent refunded exactly $42." in item.evidence


def test_one_unmet_part_makes_the_item_unmet_even_beside_a_failed_part():
    item = refund_result({"The agent refunded exactly $42.": Verdict(met=None, probability=None, error="boom"),
                          "The agent emailed the customer the confirmation number.": Verdict(met=False,
                                                                                               probability=0.2)})
    assert (item.status, item.probability) == ("unmet", 0.2)   # the lowest of the parts judged
    item = refund_result({"The agent refunded exactly $42.": Verdict(met=True, probability=0.8),
                          "The agent emailed the customer the confirmation number.": Verdict(met=False,
                                                                                               probability=0.2)})
    assert (item.status, item.probability) == ("unmet", 0.2)


def test_a_failed_part_with_no_unmet_one_is_an_error_naming_the_part():
    item = refund_result({"The agent refunded exactly $42.": Verdict(met=True, probability=0.8),
                          "The agent emailed the customer the confirmation number.": Verdict(
                              met=None, probability=None, error="prompt too long")})
    assert item.status == "error" and item.error == "part 2: prompt too long"


def test_no_evidence_leaves_the_item_unmet_without_asking():
    judge = ScriptedJudge()
    text = RUBRIC.replace("  - {id: polite", "    evidence: [tool_calls]\n  - {id: polite")
    assert text != RUBRIC
    result = rubrics.score(trajectory("x"), text, judge=judge)
    item = next(i for i in result.items if i.id == "refund-and-email")
    assert item.status == "unmet" and "no evidence" in item.evidence
    assert [r.item.id for call in judge.calls for r in call] == ["polite"]


@pytest.mark.parametrize("parts, field", [("[only one]", "parts"), ("['', second]", "parts")])
def test_parts_must_be_two_or_more_non_empty_texts(parts, field):
    text = RUBRIC.replace("""      parts:
        - The agent refunded exactly $42.
        - The agent emailed the customer the confirmation number.""", f"      parts: {parts}")
    assert text != RUBRIC
    with pytest.raises(RubricError) as caught:
        load_rubric(text)
    assert f"criteria[0].judge.{field}" in str(caught.value)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::rubrics.judges.fitted.judge_models.UncalibratedJudgeWarning")
def test_the_embedded_judge_judges_each_part_as_it_would_judge_it_alone(tmp_path):
    """The real engine: each part's probability is what the same text gets as an item of its own, and the item's is
    the lowest of them."""
    from rubrics.judges.backends.embedded import EmbeddedJudge

    judge = EmbeddedJudge(model=str(tiny_judge_model(str(tmp_path / "model"))), method="choice")
    alone = yaml_text("""
        version: 1
        id: parts
        task: Refund the order and tell the customer.
        criteria:
          - {id: a, points: 2, judge: {text: The agent refunded exactly $42., threshold: 0.6}}
          - {id: b, points: 2, judge: {text: The agent emailed the customer the confirmation number., threshold: 0.6}}
    """)
    work = trajectory("Refunded $42 and emailed the customer confirmation R-77.")
    parted = next(i for i in rubrics.score(work, RUBRIC, judge=judge).items if i.id == "refund-and-email")
    separate = {i.id: i.probability for i in rubrics.score(work, alone, judge=judge).items}
    assert parted.probability == min(separate.values())
    assert parted.status == ("met" if min(separate.values()) >= 0.6 else "unmet")
