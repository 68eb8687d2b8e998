import sys

import pytest
from rubric_fakes import EXAMPLE_RUBRIC, ScriptedJudge, always, trajectory, yaml_text

import rubrics
from rubrics.judges import NoJudge, Verdict
from rubrics.judges.extras import MissingExtraError

RUBRIC = yaml_text("""
    version: 1
    id: r
    task: t
    gates:
      - {id: g-code, contains: {text: GATE}}
      - {id: g-judge, judge: the gate holds}
    criteria:
      - {id: r3, points: 3, contains: {text: THREE}}
      - {id: r2, points: 2, judge: good}
      - {id: p4, points: -4, contains: {text: BAD}}
      - {id: p1, points: -1, judge: bad}
""")


def by_id(result):
    return {item.id: item for item in result.items}


def test_all_met_rewards_and_no_penalty():
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=ScriptedJudge(
        lambda r: Verdict(met=not r.item.penalty, probability=0.8)))
    assert (result.gates_passed, result.earned, result.total, result.score, result.complete) == (True, 5, 5, 1.0, True)
    assert result.judge == "scripted" and result.errors == []
    item = by_id(result)["r2"]
    assert (item.method, item.status, item.probability, item.points) == ("judge", "met", 0.8, 2)
    assert by_id(result)["r3"].method == "code" and "THREE" in by_id(result)["r3"].evidence


def test_failed_gate_gives_zero_but_every_item_is_reported():
    result = rubrics.score(trajectory("THREE"), RUBRIC, judge=always(True))
    assert result.gates_passed is False and result.score == 0.0
    assert len(result.items) == 6 and by_id(result)["r3"].status == "met"
    assert result.earned == 3 - 1 + 2   # r3 + r2 - p1: earned is still computed and reported


def test_penalties_clip_at_zero():
    result = rubrics.score(trajectory("GATE BAD"), RUBRIC, judge=ScriptedJudge(
        lambda r: Verdict(met=r.item.penalty or r.item.kind == "gate", probability=0.9)))
    assert result.earned == -5 and result.score == 0.0 and result.gates_passed is True


def test_partial_score():
    result = rubrics.score(trajectory("GATE THREE BAD"), RUBRIC, judge=always(True))
    assert result.earned == 3 + 2 - 4 - 1 and result.score == 0.0
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=always(False).__class__(
        lambda r: Verdict(met=r.item.kind == "gate", probability=0.5)))
    assert result.earned == 3 and result.score == pytest.approx(3 / 5)


def test_judge_errors_are_errors_never_unmet():
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=always(None, error="server down"))
    items = by_id(result)
    assert items["g-judge"].status == "error" and items["g-judge"].error == "server down"
    assert result.gates_passed is None and result.complete is False
    assert result.score == pytest.approx(3 / 5)   # what was evaluated; `complete` says it is partial
    assert "g-judge: server down" in result.errors


def test_no_judge_reports_not_evaluated():
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=NoJudge())
    statuses = {i.id: (i.status, i.error) for i in result.items if i.method == "judge"}
    assert all(s == "error" and "not evaluated" in e and "--judge none" in e for s, e in statuses.values())
    assert result.complete is False and result.judge == "none"


class Exploding:
    name = "exploding"

    def judge(self, requests):
        raise RuntimeError("boom")


class Short:
    name = "short"

    def judge(self, requests):
        return [Verdict(met=True, probability=1.0)]


@pytest.mark.parametrize("judge, message", [(Exploding(), "judge 'exploding' failed: RuntimeError: boom"),
                                            (Short(), "judge returned 1 verdicts for 3 requests")])
def test_a_broken_judge_fails_its_items_only(judge, message):
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=judge)
    judged = [i for i in result.items if i.method == "judge"]
    assert all(i.status == "error" and i.error == message for i in judged)
    assert by_id(result)["r3"].status == "met"


def test_check_errors_and_crashes_are_item_errors(monkeypatch):
    from rubrics.checks.base import CheckError
    from rubrics.checks.text import ContainsCheck

    def fail(self, config, traj):
        if "THREE" in config.needles:
            raise CheckError("grader broke")
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(ContainsCheck, "run", fail)
    result = rubrics.score(trajectory("GATE"), RUBRIC, judge=always(True))
    items = by_id(result)
    assert items["r3"].status == "error" and "grader broke" in items["r3"].error
    assert items["g-code"].status == "error" and "ZeroDivisionError: bug" in items["g-code"].error
    assert result.gates_passed is None and not result.complete


def test_score_many_sends_every_request_in_one_call_and_isolates_bad_trajectories():
    judge = always(True)
    trajs = [trajectory("GATE", id="a"), {"id": "bad", "messages": "not a list"}, trajectory("GATE THREE", id="b")]
    results = rubrics.score_many(trajs, RUBRIC, judge=judge)
    assert len(judge.calls) == 1 and [(r.context.trajectory_id, r.item.id) for r in judge.calls[0]] == \
        [("a", "g-judge"), ("a", "r2"), ("a", "p1"), ("b", "g-judge"), ("b", "r2"), ("b", "p1")]
    assert [r.trajectory_id for r in results] == ["a", "bad", "b"]
    assert results[1].items == [] and results[1].complete is False and "cannot load" in results[1].errors[0]
    assert results[0].complete and results[2].complete


def test_duplicate_trajectory_ids_still_get_their_own_verdicts():
    # the judge answers from each request's own evidence, so a verdict given to the wrong trajectory shows
    judge = ScriptedJudge(lambda r: Verdict(met="YES" in r.context.evidence[0].text, probability=0.7))
    first, second = rubrics.score_many([trajectory("GATE YES", id="same"), trajectory("GATE no", id="same")],
                                       RUBRIC, judge=judge)
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 6
    assert [r.context.trajectory_id for r in judge.calls[0]] == ["same"] * 6
    assert [by_id(first)[i].status for i in ("g-judge", "r2", "p1")] == ["met", "met", "met"]
    assert [by_id(second)[i].status for i in ("g-judge", "r2", "p1")] == ["unmet", "unmet", "unmet"]
    assert (first.gates_passed, first.earned) == (True, 2 - 1) and (second.gates_passed, second.earned) == (False, 0)


def test_progress_is_reported():
    seen = []
    rubrics.score_many([trajectory("a", id="1"), trajectory("b", id="2")], RUBRIC, judge=always(True),
                       progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]


def test_deterministic_rubric_never_builds_a_judge(monkeypatch):
    import rubrics.judges.factory as factory

    monkeypatch.setattr(factory, "build_judge", lambda spec: pytest.fail("judge built"))
    text = RUBRIC.split("gates:")[0] + "criteria:\n  - {id: c, points: 1, contains: {text: x}}\n"
    result = rubrics.score(trajectory("x"), text)   # judge=None would mean the embedded judge
    assert result.score == 1.0 and result.judge is None


def test_embedded_judge_construction_failing_on_a_missing_extra_says_how_to_install(monkeypatch):
    import types

    class EmbeddedJudge:
        def __init__(self, **options):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setitem(sys.modules, "rubrics.judges.backends.embedded", types.SimpleNamespace(EmbeddedJudge=EmbeddedJudge))
    with pytest.raises(MissingExtraError, match=r"pip install 'agent-rubrics\[engine\]'"):
        rubrics.score(trajectory("GATE"), RUBRIC)


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_real_embedded_judge_without_the_engine_says_how_to_install(monkeypatch, missing):
    for name in list(sys.modules):
        if name.split(".")[0] == missing:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)   # what an environment without the extra looks like
    with pytest.raises(MissingExtraError, match=rf"'{missing}' is not installed.*pip install 'agent-rubrics\[engine\]'"):
        rubrics.score(trajectory("GATE"), RUBRIC)


def test_missing_extra_raised_inside_judge_becomes_item_error():
    class NeedsTorch:
        name = "embedded"

        def judge(self, requests):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")

    result = rubrics.score(trajectory("GATE"), RUBRIC, judge=NeedsTorch())
    assert "pip install 'agent-rubrics[engine]'" in by_id(result)["r2"].error


def test_example_rubric_score_is_in_range():
    traj = EXAMPLE_RUBRIC.parent / "trajectories" / "01-all-gates-pass.json"
    result = rubrics.score(traj, EXAMPLE_RUBRIC, judge=ScriptedJudge(lambda r: Verdict(met=not r.item.penalty, probability=1.0)))
    assert result.score == 1.0 and result.earned == 8 and result.to_dict()["items"][0]["id"] == "mis-to-cfo"


def test_score_many_reads_every_line_of_a_jsonl_path(tmp_path):
    path = tmp_path / "batch.jsonl"
    path.write_text('{"id": "x", "final_answer": "GATE"}\n{"id": "y", "messages": 3}\n{"id": "z", "final_answer": "THREE"}\n')
    results = rubrics.score_many([path, trajectory("GATE", id="w")], RUBRIC, judge=always(True))
    assert [r.trajectory_id for r in results] == ["x", f"{path}:2", "z", "w"]
    assert results[1].errors and not results[1].items


def test_score_raises_for_a_trajectory_that_cannot_load():
    from rubrics.trajectory import TrajectoryError

    with pytest.raises(TrajectoryError):
        rubrics.score({"id": "bad", "messages": 3}, RUBRIC, judge=always(True))


# Expected score, uncertain band, score range, reward (the maths itself is in test_expectation.py).

BANDS = yaml_text("""
    version: 1
    id: bands
    task: t
    judge: {uncertain: [0.2, 0.8]}
    criteria:
      - {id: own, points: 1, judge: {text: own band, uncertain: [0.45, 0.55]}}
      - {id: rubric, points: 1, judge: rubric band}
      - {id: code, points: 1, contains: {text: X}}
""")


def at(probability: float) -> ScriptedJudge:
    return ScriptedJudge(lambda r: Verdict(met=probability > r.item.threshold, probability=probability))


def test_every_result_carries_expected_score_range_and_uncertain_count():
    probabilities = {"g-judge": 0.9, "r2": 0.5, "p1": 0.2}
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=ScriptedJudge(
        lambda r: Verdict(met=probabilities[r.item.id] > 0.5, probability=probabilities[r.item.id])))
    assert result.score == pytest.approx(3 / 5) and result.complete
    # gate 0.9 x E[min(1, max(0, 3 + 2·[r2] - 1·[p1]) / 5)] over r2 ~ 0.5, p1 ~ 0.2
    assert result.expected_score == pytest.approx(0.9 * (0.5 * 0.8 * 1.0 + 0.5 * 0.2 * 0.8 + 0.5 * 0.8 * 0.6
                                                         + 0.5 * 0.2 * 0.4))
    assert [i.id for i in result.items if i.uncertain] == ["r2"] and result.uncertain_items == 1
    assert (result.score_low, result.score_high) == (pytest.approx(3 / 5), 1.0)
    assert result.reward == result.score   # hard by default


def test_reward_expected_is_the_expected_score():
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=at(0.7), reward="expected")
    assert result.reward == result.expected_score and result.expected_score < result.score


def test_incomplete_results_have_no_expected_score_or_range_never_a_partial_number():
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=NoJudge(), reward="expected")
    assert not result.complete and result.score == pytest.approx(3 / 5)   # the hard score stays partial
    assert (result.expected_score, result.score_low, result.score_high, result.reward) == (None, None, None, None)
    hard = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=NoJudge())
    assert hard.reward is None and not any(i.uncertain for i in hard.items)   # a partial score is no reward
    unloadable = {"id": "bad", "messages": "not a list"}
    for reward in ("hard", "expected"):
        failed = rubrics.score_many([unloadable], RUBRIC, judge=always(True), reward=reward)[0]
        assert (failed.expected_score, failed.score_low, failed.reward) == (None, None, None)


def test_get_reward_never_turns_an_incomplete_result_into_a_silent_zero():
    import math

    from rubrics.result import IncompleteResultError

    complete = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=always(True))
    assert complete.get_reward() == complete.score == complete.reward
    incomplete = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=NoJudge())
    with pytest.raises(IncompleteResultError, match="has no reward: its result is incomplete"):
        incomplete.get_reward()
    assert math.isnan(incomplete.get_reward(on_error="nan")) and incomplete.get_reward(on_error="zero") == 0.0
    failed = rubrics.score_many([{"id": "bad", "messages": "not a list"}], RUBRIC, judge=always(True))[0]
    with pytest.raises(IncompleteResultError, match="'bad'"):
        failed.get_reward()
    with pytest.raises(ValueError, match="on_error"):
        complete.model_copy(update={"reward": None}).get_reward(on_error="skip")


def test_the_uncertain_band_is_inclusive_and_resolved_item_then_override_then_rubric_then_default():
    inside_default = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=at(0.35))
    assert {i.id for i in inside_default.items if i.uncertain} == {"g-judge", "r2", "p1"}
    assert not any(i.uncertain for i in rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=at(0.3)).items)
    assert not any(i.uncertain for i in rubrics.score(trajectory("GATE"), RUBRIC, judge=at(0.66)).items)

    def flagged(probability, **kw):
        return {i.id for i in rubrics.score(trajectory("X"), BANDS, judge=at(probability), **kw).items if i.uncertain}
    assert flagged(0.3) == {"rubric"} and flagged(0.5) == {"own", "rubric"}
    assert flagged(0.3, uncertain=(0.0, 0.1)) == set()           # the override replaces the rubric's band ...
    assert flagged(0.5, uncertain=(0.0, 0.1)) == {"own"}         # ... but not an item's own
    plain = BANDS.replace("judge: {uncertain: [0.2, 0.8]}\n", "")
    assert plain != BANDS
    assert {i.id for i in rubrics.score(trajectory("X"), plain, judge=at(0.3)).items if i.uncertain} == set()
    assert {i.id for i in rubrics.score(trajectory("X"), plain, judge=at(0.4)).items if i.uncertain} == {"rubric"}


def test_a_verdict_without_probability_counts_at_its_status_and_is_never_uncertain():
    result = rubrics.score(trajectory("GATE THREE"), RUBRIC, judge=ScriptedJudge(
        lambda r: Verdict(met=not r.item.penalty, probability=None)))
    assert result.score == result.expected_score == result.score_low == result.score_high == 1.0
    assert result.uncertain_items == 0


def test_a_band_the_wrong_way_round_is_a_rubric_error():
    with pytest.raises(rubrics.RubricError, match="low end 0.7 is above its high end 0.3"):
        rubrics.load_rubric(BANDS.replace("[0.2, 0.8]", "[0.7, 0.3]"))
