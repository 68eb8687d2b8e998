"""The likelihood method's maths: pmi per token against the content-free baseline, its shipped calibration, and
the prompts it asks for (a content-free baseline first, then the trajectory's own evidence)."""
from __future__ import annotations

import pytest

from rubrics.judges.fitted.logistic import sigmoid
from rubrics.judges.methods import IDENTITY, Calibration, LikelihoodMethod, ScoredPrompt
from rubrics.judges.methods import likelihood, statement
from rubrics.judges.protocol import JudgeExample, JudgeItem

ITEM = JudgeItem(id="a", kind="criterion", points=3, criterion="flags the 2 expenses approved without sign-off")


def scored(evidence_logprob: float, baseline_logprob: float, tokens: int) -> list[ScoredPrompt]:
    """Scores in the order prompts() gives them: the content-free baseline, then the evidence prompt."""
    return [ScoredPrompt((baseline_logprob,), (tokens,)), ScoredPrompt((evidence_logprob,), (tokens,))]


def test_pmi_is_the_per_token_gain_over_the_content_free_baseline():
    method = LikelihoodMethod()
    assert method.raw_score(ITEM, scored(-10.0, -16.0, 4)) == pytest.approx(1.5)
    assert method.raw_score(ITEM, scored(-16.0, -10.0, 3)) == pytest.approx(-2.0)
    assert method.raw_score(ITEM, scored(-1.0, -3.0, 0)) == pytest.approx(2.0)   # never divides by zero


def test_the_verdict_maps_pmi_through_the_calibration_and_the_items_threshold():
    # a method alone knows no model: uncalibrated (each judge model ships its own calibration)
    assert LikelihoodMethod().calibration == IDENTITY == LikelihoodMethod.default_calibration
    fitted = Calibration(0.6358, 0.0197)
    shipped = LikelihoodMethod(fitted).verdict(ITEM, scored(-10.0, -16.0, 4))
    assert shipped.probability == pytest.approx(sigmoid(fitted.scale * 1.5 + fitted.offset))
    assert shipped.met is True and shipped.detail.startswith("likelihood p=") and shipped.rationale is None
    assert "+1.500 nats/token" in shipped.detail
    # the identity gives sigmoid(pmi)
    assert LikelihoodMethod(IDENTITY).verdict(ITEM, scored(-10.0, -16.0, 4)).probability == \
        pytest.approx(sigmoid(1.5))
    assert LikelihoodMethod(Calibration(4.0, 1.0)).verdict(ITEM, scored(-1.0, 0.0, 4)).probability == \
        pytest.approx(0.5)
    strict = JudgeItem(id="a", kind="criterion", points=3, criterion="x", threshold=0.99)
    assert LikelihoodMethod(fitted).verdict(strict, scored(-10.0, -16.0, 4)).met is False


def test_prompts_are_a_content_free_baseline_then_the_evidence_prompt_over_one_statement():
    baseline, main = LikelihoodMethod().prompts(ITEM)
    assert (baseline.content_free, main.content_free) == (True, False)
    assert baseline.item == main.item and baseline.choices == main.choices
    assert baseline.instructions == main.instructions == statement.INSTRUCTIONS
    assert main.lead_in == "The agent's work" and [c.text for c in main.choices] == \
        [" flags the 2 expenses approved without sign-off."]
    assert not main.choices[0].trusted   # the rubric's text is never encoded with special tokens
    assert main.item[-1].text == statement.QUESTION and main.reasoning is None
    # the prompt never shows the item as a question: only the scored statement carries it
    assert all("flags the 2 expenses" not in piece.text for piece in main.item)


def test_statement_parts():
    assert statement.statement_parts("flags the 2 expenses.") == ("The agent's work", " flags the 2 expenses.")
    assert statement.statement_parts("one page, readable by a CFO") == \
        ("In the agent's work,", " one page, readable by a CFO.")
    assert statement.statement_parts("is   one page") == ("The agent's work", " is one page.")


def test_examples_say_whether_the_statement_holds():
    item = JudgeItem(id="a", kind="criterion", points=3, criterion="flags the 2 expenses",
                     examples=(JudgeExample("EXP-221 lacks sign-off", True), JudgeExample("All fine.", False)))
    text = "".join(piece.text for piece in statement.examples_pieces(item))
    assert 'For example 1, the statement "The agent\'s work flags the 2 expenses." is true.' in text
    assert 'For example 2, the statement "The agent\'s work flags the 2 expenses." is false.' in text
    assert statement.examples_pieces(ITEM) == []


def test_statement_scores_the_likelihood_methods_own_prompt_without_the_baseline():
    from rubrics.judges.methods import StatementMethod

    statement, = StatementMethod().prompts(ITEM)
    baseline, evidence = LikelihoodMethod().prompts(ITEM)
    assert statement == evidence and baseline.content_free and not statement.content_free
    method = StatementMethod(IDENTITY)
    assert method.raw_score(ITEM, [ScoredPrompt((-12.0,), (4,))]) == pytest.approx(-3.0)
    assert method.raw_score(ITEM, [ScoredPrompt((-2.0,), (0,))]) == pytest.approx(-2.0)   # never divides by zero
    verdict = StatementMethod().verdict(ITEM, [ScoredPrompt((-12.0,), (4,))])
    assert verdict.probability == pytest.approx(StatementMethod.default_calibration.probability(-3.0))
    assert "nats/token" in verdict.detail


def test_the_content_free_baseline_shifts_every_trajectory_of_an_item_alike():
    """For one item the baseline is one number, so likelihood and statement order its trajectories the same way."""
    from rubrics.judges.methods import StatementMethod

    evidence_logprobs = [-20.0, -9.0, -14.0]
    pmi = [LikelihoodMethod(IDENTITY).raw_score(ITEM, scored(lp, -16.0, 4)) for lp in evidence_logprobs]
    plain = [StatementMethod(IDENTITY).raw_score(ITEM, [ScoredPrompt((lp,), (4,))]) for lp in evidence_logprobs]
    assert sorted(range(3), key=pmi.__getitem__) == sorted(range(3), key=plain.__getitem__)
