"""score_many with a rubric per trajectory: (trajectory, rubric) pairs, one judge call, each rubric compiled once."""
import json

import pytest
from rubric_fakes import ScriptedJudge, always, trajectory, yaml_text

import rubrics
from rubrics.judges import Verdict

FIRST = yaml_text("""
    version: 1
    id: first
    task: write a report
    criteria:
      - {id: says-a, points: 2, contains: {text: ALPHA}}
      - {id: judged-a, points: 1, judge: the report is clear}
""")
SECOND = yaml_text("""
    version: 1
    id: second
    task: answer a question
    gates:
      - {id: gate-b, judge: the answer is polite}
    criteria:
      - {id: says-b, points: 3, contains: {text: BETA}}
""")


def test_pairs_go_to_the_judge_in_one_call_in_pair_order():
    judge = ScriptedJudge(lambda r: Verdict(met="YES" in r.context.evidence[0].text, probability=0.8))
    pairs = [(trajectory("ALPHA YES", id="t1"), FIRST), (trajectory("BETA no", id="t2"), SECOND),
             (trajectory("ALPHA no", id="t3"), FIRST)]
    results = rubrics.score_many(pairs, judge=judge)
    assert len(judge.calls) == 1
    assert [(r.context.trajectory_id, r.item.id, r.context.task) for r in judge.calls[0]] == [
        ("t1", "judged-a", "write a report"), ("t2", "gate-b", "answer a question"), ("t3", "judged-a", "write a report")]
    assert [(r.trajectory_id, r.rubric_id, r.earned, r.total, r.score) for r in results] == [
        ("t1", "first", 3, 3, 1.0), ("t2", "second", 3, 3, 0.0), ("t3", "first", 2, 3, 2 / 3)]
    assert results[1].gates_passed is False


def test_a_rubric_per_trajectory_equals_pairs_and_pair_objects():
    trajs = [trajectory("ALPHA", id="a"), trajectory("BETA", id="b")]
    by_list = rubrics.score_many(trajs, [FIRST, SECOND], judge=always(True))
    by_pairs = rubrics.score_many([rubrics.Pair(t, r) for t, r in zip(trajs, [FIRST, SECOND])], judge=always(True))
    assert [r.to_dict() for r in by_list] == [r.to_dict() for r in by_pairs]
    with pytest.raises(ValueError, match="2 trajectories but 1 rubrics"):
        rubrics.score_many(trajs, [FIRST], judge=always(True))
    with pytest.raises(TypeError, match="input #0 is a dict"):
        rubrics.score_many(trajs, judge=always(True))


def test_each_distinct_rubric_is_compiled_once(monkeypatch):
    import rubrics.grading.jobs

    compiled = []
    real = rubrics.grading.jobs.compile_rubric
    monkeypatch.setattr(rubrics.grading.jobs, "compile_rubric", lambda r, u=None: compiled.append(r.id) or real(r, u))
    loaded = rubrics.load_rubric(SECOND)
    pairs = [(trajectory("ALPHA", id=str(i)), FIRST if i % 2 else loaded) for i in range(10)]
    results = rubrics.score_many(pairs, judge=always(True))
    assert sorted(compiled) == ["first", "second"] and len(results) == 10


def test_a_bad_rubric_or_trajectory_fails_only_its_own_pairs():
    judge = always(True)
    broken = yaml_text("""
        version: 1
        id: broken
        task: t
        criteria:
          - {id: x, points: 0, contains: {text: A}}
    """)
    pairs = [(trajectory("ALPHA", id="ok"), FIRST), (trajectory("ALPHA", id="bad-rubric"), broken),
             ({"id": "bad-traj", "messages": "nope"}, FIRST)]
    ok, bad_rubric, bad_traj = rubrics.score_many(pairs, judge=judge)
    assert ok.complete and ok.reward == 1.0
    assert bad_rubric.trajectory_id == "bad-rubric" and not bad_rubric.complete and bad_rubric.reward is None
    assert "cannot load the rubric" in bad_rubric.errors[0] and "points must not be 0" in bad_rubric.errors[0]
    assert bad_traj.trajectory_id == "bad-traj" and "cannot load the trajectory" in bad_traj.errors[0]
    with pytest.raises(rubrics.RubricError):   # one rubric for all: nothing could be graded, so it raises
        rubrics.score_many([trajectory("A")], broken, judge=judge)
    assert len(judge.calls) == 1 and [r.context.trajectory_id for r in judge.calls[0]] == ["ok"]


def test_a_trajectory_file_in_a_pair_grades_every_entry_with_that_rubric(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(trajectory(t, id=t)) for t in ("ALPHA", "BETA")) + "\n")
    results = rubrics.score_many([(path, FIRST), (trajectory("BETA", id="x"), SECOND)], judge=always(True))
    assert [(r.trajectory_id, r.rubric_id) for r in results] == [("ALPHA", "first"), ("BETA", "first"),
                                                                  ("x", "second")]
