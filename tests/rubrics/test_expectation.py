"""Expected score and score range (rubrics/grading/expectation.py) against brute-force enumeration, with hypothesis.

The reference here is the score formula as the rubric format states it, applied to each of the 2^n ways the
items can fall: E[score] is the probability-weighted sum, the range the min and max over the free items' ways.
The end-to-end test enumerates through the real scorer (rubrics.score with a judge scripted to each way).
"""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rubric_fakes import ScriptedJudge, trajectory

import rubrics
from rubrics.grading.expectation import Outcome, expected_score, hard_score, in_band, score_range
from rubrics.judges import Verdict


def formula(gates: list[bool], earned: int, total: int) -> float:
    """score = 0 if a gate is unmet, else min(1, max(0, earned) / total)."""
    return 0.0 if not all(gates) or total <= 0 else min(1.0, max(0, earned) / total)


def score_when(outcomes: list[Outcome], met: tuple[bool, ...], total: int) -> float:
    gates = [m for o, m in zip(outcomes, met) if o.kind == "gate"]
    earned = sum(o.points for o, m in zip(outcomes, met) if o.kind == "criterion" and m)
    return formula(gates, earned, total)


def brute_expected(outcomes: list[Outcome], total: int) -> float:
    total_weight = 0.0
    for met in itertools.product((True, False), repeat=len(outcomes)):
        weight = math.prod(o.probability if m else 1.0 - o.probability for o, m in zip(outcomes, met))
        total_weight += weight * score_when(outcomes, met, total)
    return total_weight


def brute_range(outcomes: list[Outcome], total: int) -> tuple[float, float]:
    free = [i for i, o in enumerate(outcomes) if o.free]
    scores = []
    for ways in itertools.product((True, False), repeat=len(free)):
        met = [o.met for o in outcomes]
        for index, way in zip(free, ways):
            met[index] = way
        scores.append(score_when(outcomes, tuple(met), total))
    return min(scores), max(scores)


probabilities = st.one_of(st.sampled_from([0.0, 1.0, 0.35, 0.5, 0.65]), st.floats(0.0, 1.0))


@st.composite
def outcome(draw) -> Outcome:
    kind = draw(st.sampled_from(["gate", "criterion", "criterion"]))
    points = 0 if kind == "gate" else draw(st.integers(-6, 6).filter(bool))
    probability = draw(probabilities)
    return Outcome(kind=kind, points=points, met=draw(st.booleans()), probability=probability,
                   free=draw(st.booleans()))


@st.composite
def rubric_outcomes(draw) -> tuple[list[Outcome], int]:
    outcomes = draw(st.lists(outcome(), max_size=9))
    positive = sum(o.points for o in outcomes if o.kind == "criterion" and o.points > 0)
    return outcomes, draw(st.sampled_from([positive, positive, 0, max(1, positive // 2)]))


@settings(max_examples=400, deadline=None)
@given(rubric_outcomes())
def test_expected_score_is_the_enumerated_expectation(case):
    outcomes, total = case
    assert expected_score(outcomes, total) == pytest.approx(brute_expected(outcomes, total), abs=1e-12)
    assert 0.0 <= expected_score(outcomes, total) <= 1.0


@settings(max_examples=400, deadline=None)
@given(rubric_outcomes())
def test_score_range_is_the_enumerated_min_and_max_over_the_free_items(case):
    outcomes, total = case
    assert score_range(outcomes, total) == brute_range(outcomes, total)


@settings(max_examples=400, deadline=None)
@given(rubric_outcomes())
def test_the_hard_score_lies_in_the_range(case):
    outcomes, total = case
    low, high = score_range(outcomes, total)
    assert low <= score_when(outcomes, tuple(o.met for o in outcomes), total) <= high


def at_verdict_unless_free(outcomes: list[Outcome]) -> list[Outcome]:
    """The items outside the band at their verdict (probability 1 or 0), the free ones at their probability."""
    return [o if o.free else Outcome(o.kind, o.points, o.met, float(o.met)) for o in outcomes]


@settings(max_examples=400, deadline=None)
@given(rubric_outcomes())
def test_the_expectation_over_the_uncertain_items_lies_in_the_range(case):
    """What holds in general: E[score | every item outside the band at its verdict] is in [low, high]."""
    outcomes, total = case
    low, high = score_range(outcomes, total)
    conditional = expected_score(at_verdict_unless_free(outcomes), total)
    assert low - 1e-12 <= conditional <= high + 1e-12


@settings(max_examples=300, deadline=None)
@given(rubric_outcomes())
def test_expected_score_lies_in_the_range_when_every_item_outside_the_band_is_certain(case):
    """So with the band [0, 1] (every judge item free; code items are always certain) it always holds."""
    outcomes, total = case
    outcomes = at_verdict_unless_free(outcomes)
    low, high = score_range(outcomes, total)
    assert low - 1e-12 <= expected_score(outcomes, total) <= high + 1e-12


def test_expected_score_can_leave_the_range_when_a_confident_item_may_still_fail():
    """The issue's literal `score_low <= expected_score <= score_high` cannot hold: a verdict at 0.9, outside the
    band, keeps its verdict in the range (score 1, range [1, 1]) but weighs the expectation down to 0.9."""
    outcomes = [Outcome("criterion", 1, met=True, probability=0.9)]
    assert score_range(outcomes, 1) == (1.0, 1.0)
    assert expected_score(outcomes, 1) == pytest.approx(0.9)


def test_a_gate_that_may_fail_weighs_the_score_down():
    outcomes = [Outcome("gate", 0, True, 0.8), Outcome("criterion", 2, True, 1.0), Outcome("criterion", 2, False, 0.5)]
    assert expected_score(outcomes, 4) == pytest.approx(0.8 * (0.5 * 1.0 + 0.5 * 0.5))
    assert expected_score([Outcome("gate", 0, False, 0.0), *outcomes[1:]], 4) == 0.0


def test_penalties_clip_at_zero_and_bonuses_at_one_inside_the_expectation():
    outcomes = [Outcome("criterion", 2, True, 0.5), Outcome("criterion", -5, True, 0.5)]
    # earned: 2 (0.25), -3 -> 0 (0.25), -5 -> 0 (0.25), 0 (0.25)
    assert expected_score(outcomes, 2) == pytest.approx(0.25)
    assert expected_score([Outcome("criterion", 4, True, 0.5)], 2) == pytest.approx(0.5)   # min(1, 4 / 2)


def test_the_band_is_inclusive():
    band = (0.35, 0.65)
    assert [in_band(p, band) for p in (0.3499, 0.35, 0.5, 0.65, 0.6501, None)] == [False, True, True, True, False,
                                                                                   False]


def test_the_maths_uses_the_rubric_formula():
    assert hard_score(True, -3, 5) == 0.0 and hard_score(True, 7, 5) == 1.0 and hard_score(False, 5, 5) == 0.0
    assert hard_score(True, 3, 0) == 0.0


def test_many_items_stay_fast_and_exact():
    """The dynamic program has one entry per reachable sum: 60 items of 1 point take 61 entries, not 2^60."""
    outcomes = [Outcome("criterion", 1, True, 0.5) for _ in range(60)]
    assert expected_score(outcomes, 60) == pytest.approx(0.5)


# End to end: through rubrics.score, with the judge scripted to each way the judge items could fall.

@st.composite
def small_rubric(draw):
    """(rubric dict, final answer, judge probabilities): up to 4 judge items and 2 code items."""
    items, probabilities, final = [], {}, []
    for index in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["gates", "criteria", "criteria"]))
        item = {"id": f"i{index}"}
        if index == 0:   # a rubric needs a criterion with positive points (else there is no denominator)
            kind = "criteria"
        if kind == "criteria":
            item["points"] = draw(st.integers(1, 4) if index == 0 else st.integers(-4, 4).filter(bool))
        if len(probabilities) < 4 and draw(st.booleans()):
            item["judge"] = f"item {index}"
            probabilities[item["id"]] = draw(probabilities_strategy)
        else:
            item["contains"] = {"text": f"WORD{index}"}
            if draw(st.booleans()):
                final.append(f"WORD{index}")
        items.append((kind, item))
    rubric = {"version": 1, "id": "r", "task": "t",
              "gates": [i for k, i in items if k == "gates"], "criteria": [i for k, i in items if k == "criteria"]}
    # a final answer always: judge items with no evidence at all are decided without the judge (test_empty_evidence)
    return rubric, " ".join(["Done.", *final]), probabilities


probabilities_strategy = st.one_of(st.sampled_from([0.0, 1.0, 0.35, 0.65]), st.floats(0.0, 1.0))


def scripted(probabilities: dict[str, float], met: dict[str, bool] | None = None) -> ScriptedJudge:
    def decide(request):
        p = probabilities[request.item.id]
        return Verdict(met=met[request.item.id] if met else p > request.item.threshold, probability=p)
    return ScriptedJudge(decide)


@settings(max_examples=40, deadline=None)
@given(small_rubric())
def test_the_scorers_expected_score_and_range_match_enumeration_through_the_real_scorer(case):
    rubric, final, probabilities = case
    result = rubrics.score(trajectory(final), rubric, judge=scripted(probabilities))
    ids = sorted(probabilities)
    expected, uncertain_scores = 0.0, []
    uncertain = {i.id for i in result.items if i.uncertain}
    verdict = {i.id: i.status == "met" for i in result.items if i.method == "judge"}
    for ways in itertools.product((True, False), repeat=len(ids)):
        met = dict(zip(ids, ways))
        forced = rubrics.score(trajectory(final), rubric, judge=scripted(probabilities, met))
        expected += math.prod(probabilities[i] if met[i] else 1.0 - probabilities[i] for i in ids) * forced.score
        if all(met[i] == verdict[i] for i in ids if i not in uncertain):
            uncertain_scores.append(forced.score)
    assert result.complete and result.expected_score == pytest.approx(expected, abs=1e-12)
    assert (result.score_low, result.score_high) == (min(uncertain_scores), max(uncertain_scores))
    assert result.score_low <= result.score <= result.score_high
    assert uncertain == {i for i, p in probabilities.items() if 0.35 <= p <= 0.65}
    assert result.uncertain_items == len(uncertain)
