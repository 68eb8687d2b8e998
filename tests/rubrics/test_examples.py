"""examples/cfo-mis: every trajectory's deterministic outcome is the one stated in expected.json."""
import json

import pytest
from rubric_fakes import EXAMPLE_DIR, EXAMPLE_RUBRIC, ScriptedJudge

import rubrics
from rubrics.judges import NoJudge, Verdict

EXPECTED = json.loads((EXAMPLE_DIR / "expected.json").read_text())["trajectories"]
FILES = sorted(p.name for p in (EXAMPLE_DIR / "trajectories").glob("*.json"))


def test_every_trajectory_has_an_expectation_and_there_are_at_least_six():
    assert sorted(EXPECTED) == FILES and len(FILES) >= 6


@pytest.mark.parametrize("name", FILES)
def test_deterministic_outcome(name):
    result = rubrics.score(EXAMPLE_DIR / "trajectories" / name, EXAMPLE_RUBRIC, judge=NoJudge())
    expected = EXPECTED[name]
    code_items = {i.id: i.status for i in result.items if i.method == "code"}
    assert code_items == expected["items"]
    assert result.gates_passed is expected["gates_passed"]
    if not expected["gates_passed"]:
        assert result.score == 0.0
    judged = [i for i in result.items if i.method == "judge"]
    decided = {i.id for i in judged if i.status == "unmet" and i.probability is None and "not found in" in i.evidence}
    assert decided == set(expected["facts_missing"])   # a missing fact decides without a judge
    assert judged and all(i.status == "error" for i in judged if i.id not in decided) and not result.complete


def test_outcomes_cover_every_case_of_the_issue():
    outcomes = {name: (e["gates_passed"], e["items"]) for name, e in EXPECTED.items()}
    assert any(g for g, _ in outcomes.values()) and any(not g for g, _ in outcomes.values())
    assert any(items["emails-others"] == "met" and g for g, items in outcomes.values())   # a penalty with gates passed
    assert outcomes["04-wrong-recipient.json"][1]["mis-to-cfo"] == "unmet"
    assert outcomes["05-indian-grouping.json"][1]["total-spend"] == "met"
    assert outcomes["06-just-outside-tolerance.json"][1]["total-spend"] == "unmet"


def test_penalties_push_below_zero_and_clip():
    penalties_only = ScriptedJudge(lambda r: Verdict(met=r.item.penalty, probability=0.9))
    result = rubrics.score(EXAMPLE_DIR / "trajectories" / "03-penalties-clip.json", EXAMPLE_RUBRIC, judge=penalties_only)
    assert result.gates_passed is True and result.earned == -5 and result.score == 0.0 and result.complete


def test_full_marks_with_a_judge_that_agrees():
    judge = ScriptedJudge(lambda r: Verdict(met=not r.item.penalty, probability=0.9))
    result = rubrics.score(EXAMPLE_DIR / "trajectories" / "01-all-gates-pass.json", EXAMPLE_RUBRIC, judge=judge)
    assert (result.score, result.earned, result.total, result.complete) == (1.0, 8, 8, True)
