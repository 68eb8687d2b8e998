"""PanelJudge's combination rules, Fleiss' kappa, and the member texts of --panel-member and `judge: panel`."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rubrics
from rubric_fakes import ScriptedJudge, trajectory, yaml_text
from rubrics.judges.panel.agreement import fleiss_kappa, panel_agreement
from rubrics.judges.panel.judge import PanelJudge, PanelMember, mean_logit_probability
from rubrics.judges.panel.members import parse_member
from rubrics.judges.protocol import MemberVerdict, Verdict
from rubrics.judges.usage import JudgeUsage
from test_judge_prompts import request


def fixed(probability: float | None, name: str, error: str | None = None, usage: int = 0) -> ScriptedJudge:
    judge = ScriptedJudge(lambda r: Verdict(met=None if probability is None else probability >= r.item.threshold,
                                            probability=probability, error=error,
                                            usage=JudgeUsage(prompt_tokens=usage) if usage else None))
    judge.name = name
    return judge


def test_mean_logit_combines_on_the_logit_scale_and_keeps_each_members_verdict():
    panel = PanelJudge([fixed(0.9, "a", usage=5), fixed(0.3, "b", usage=7)])
    verdict, = panel.judge([request()])
    expected = 1 / (1 + math.exp(-(math.log(9) + math.log(3 / 7)) / 2))
    assert verdict.probability == pytest.approx(expected) and verdict.met is (expected >= 0.5)
    assert verdict.members == (MemberVerdict(judge="a", met=True, probability=0.9),
                               MemberVerdict(judge="b", met=False, probability=0.3))
    assert verdict.usage == JudgeUsage(prompt_tokens=12)
    assert "a met 0.900" in verdict.rationale and "b unmet 0.300" in verdict.rationale


def test_majority_votes_and_a_tie_goes_to_the_mean_logit():
    three = PanelJudge([fixed(0.9, "a"), fixed(0.4, "b"), fixed(0.45, "c")], combine="majority")
    verdict, = three.judge([request()])
    assert (verdict.met, verdict.probability) == (False, pytest.approx(1 / 3))
    tie = PanelJudge([fixed(0.95, "a"), fixed(0.4, "b")], combine="majority")
    verdict, = tie.judge([request()])
    assert verdict.met is True and verdict.probability == pytest.approx(0.5)   # mean logit of .95 and .4 > .5


def test_a_failing_member_is_left_out_and_an_item_no_member_answers_is_an_error():
    panel = PanelJudge([fixed(0.8, "a"), fixed(None, "b", error="server down")])
    verdict, = panel.judge([request()])
    assert verdict.error is None and verdict.probability == pytest.approx(0.8)
    assert verdict.members[1] == MemberVerdict(judge="b", met=None, probability=None, error="server down")
    assert "1 of 2 answered" in verdict.rationale
    broken = ScriptedJudge(lambda r: (_ for _ in ()).throw(RuntimeError("crash")))
    nobody = PanelJudge([fixed(None, "a", error="down"), broken])
    verdict, = nobody.judge([request()])
    assert verdict.met is None and "no panel member could judge" in verdict.error and "crash" in verdict.error


def test_members_sharing_a_judge_are_one_call_each_with_its_method():
    shared = ScriptedJudge(lambda r: Verdict(met=True, probability={"choice": 0.6, "statement": 0.7}[r.item.method]))
    other = fixed(0.2, "other")
    panel = PanelJudge([PanelMember(shared, "choice"), PanelMember(shared, "statement"), PanelMember(other)])
    verdicts = panel.judge([request(id="x"), request(id="y")])
    assert len(shared.calls) == 1 and [r.item.method for r in shared.calls[0]] == ["choice"] * 2 + ["statement"] * 2
    assert len(other.calls) == 1
    assert [m.probability for m in verdicts[1].members] == [0.6, 0.7, 0.2]
    assert [m.judge for m in verdicts[0].members] == ["scripted:choice", "scripted:statement", "other"]


def test_a_panel_needs_two_members_and_a_known_combine():
    with pytest.raises(ValueError, match="at least two"):
        PanelJudge([fixed(0.5, "a")])
    with pytest.raises(ValueError, match="combine"):
        PanelJudge([fixed(0.5, "a"), fixed(0.5, "b")], combine="median")


def test_duplicate_member_names_are_told_apart():
    assert PanelJudge([fixed(0.5, "a"), fixed(0.5, "a")]).member_names == ["a", "a#2"]


def test_fleiss_kappa_matches_a_hand_computation():
    # 4 items, 3 raters: votes met per item 3, 0, 2, 1 -> P_i = 1, 1, 1/3, 1/3; P = 2/3; p_met = 1/2; P_e = 1/2
    votes = [[True] * 3, [False] * 3, [True, True, False], [True, False, False]]
    assert fleiss_kappa(votes) == pytest.approx((2 / 3 - 1 / 2) / (1 - 1 / 2))
    assert fleiss_kappa([[True, True], [False, False]]) == pytest.approx(1.0)
    assert fleiss_kappa([[True, False], [False, True]]) == pytest.approx(-1.0)
    assert fleiss_kappa([[True, True]] * 3) is None and fleiss_kappa([]) is None


@given(st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=30))
def test_fleiss_kappa_is_at_most_one_and_one_only_when_every_item_is_unanimous(votes):
    kappa = fleiss_kappa(votes)
    if kappa is not None:
        assert kappa <= 1.0 + 1e-12
        assert (abs(kappa - 1.0) < 1e-9) == all(len(set(row)) == 1 for row in votes)


def test_panel_agreement_counts_only_items_every_member_answered():
    rows = [[MemberVerdict(judge="a", met=True), MemberVerdict(judge="b", met=True)],
            [MemberVerdict(judge="a", met=False), MemberVerdict(judge="b", met=False)],
            [MemberVerdict(judge="a", met=True), MemberVerdict(judge="b", met=None, error="x")], None]
    agreement = panel_agreement(rows)
    assert (agreement.items, agreement.kappa, agreement.unanimous, agreement.members) == (2, 1.0, 1.0, ["a", "b"])
    assert panel_agreement([None, None]) is None


def test_mean_logit_clips_certain_members():
    assert 0.0 < mean_logit_probability([1.0, 0.0]) < 1.0
    assert mean_logit_probability([1.0, 0.0]) == pytest.approx(0.5)


@pytest.mark.parametrize("text, kind, method, url, model", [
    ("embedded", "embedded", None, None, None),
    ("embedded:likelihood", "embedded", "likelihood", None, None),
    ("openai:http://127.0.0.1:8000/v1:judge", "openai", None, "http://127.0.0.1:8000/v1", "judge"),
    ("openai:http://localhost:8000:llama3:8b", "openai", None, "http://localhost:8000", "llama3:8b"),
    ("openai:https://api.example.com/v1", "openai", None, "https://api.example.com/v1", None),
])
def test_member_texts(text, kind, method, url, model):
    spec = parse_member(text)
    assert (spec.kind, spec.method, spec.base_url, spec.model) == (kind, method, url, model)


@pytest.mark.parametrize("text", ["embedded:nope", "openai:", "openai:ftp://x", "gpt-4", ""])
def test_bad_member_texts_say_the_forms(text):
    with pytest.raises(ValueError, match="panel member"):
        parse_member(text)


def test_a_rubric_panel_section_is_validated():
    from rubrics.rubric.load import RubricError, load_rubric

    base = """
        version: 1
        id: p
        task: t
        judge:
          panel:
            members: {members}
        criteria:
          - {{id: c, points: 1, judge: "says hello"}}
        """
    rubric = load_rubric(yaml_text(base.format(members="[embedded:statement, embedded:likelihood]")))
    assert rubric.judge.panel.members == ["embedded:statement", "embedded:likelihood"]
    assert rubric.judge.panel.combine == "mean_logit"
    with pytest.raises(RubricError, match=r"panel.members\[1\].*gpt-4"):
        load_rubric(yaml_text(base.format(members="[embedded, gpt-4]")))
    with pytest.raises(RubricError, match="members"):
        load_rubric(yaml_text(base.format(members="[embedded]")))


def test_grading_with_a_panel_reports_members_on_each_judge_item():
    panel = PanelJudge([fixed(0.9, "a"), fixed(0.2, "b")], combine="majority")
    rubric = yaml_text("""
        version: 1
        id: p
        task: t
        criteria:
          - {id: c, points: 1, judge: "says hello"}
        """)
    result = rubrics.score(trajectory("hello"), rubric, judge=panel)
    item, = result.items
    assert [m.judge for m in item.members] == ["a", "b"] and item.status == "met"
    assert result.to_dict()["items"][0]["members"][1] == {"judge": "b", "met": False, "probability": 0.2,
                                                          "error": None}
