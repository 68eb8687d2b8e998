"""rubrics.integrations.ray: RubricGrader in Dataset.map_batches on a local two-CPU Ray cluster, with the embedded
judge on a tiny model built once per actor; the scores are those rubrics.score gives the same trajectories."""
from __future__ import annotations

import json
import os
import sys

import pytest

from judge_models import tiny_judge_model

ray = pytest.importorskip("ray", reason="needs the [ray] extra")

import rubrics  # noqa: E402
from rubrics.integrations.ray import RubricGrader, grade_dataset  # noqa: E402

RUBRIC = r"""
version: 1
id: refund
task: Refund order 7 and confirm.
gates:
  - {id: refunded, tool_called: {name: refund_order, args: {order: 7}}}
criteria:
  - {id: confirms, points: 2, contains: {text: refunded}}
  - {id: polite, points: 1, judge: the reply is polite}
"""


def trajectory(i: int) -> dict:
    return {"id": f"t{i}", "messages": [
        {"role": "user", "content": "Refund order 7 and confirm."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "refund_order",
                                                          "arguments": json.dumps({"order": 7 if i % 3 else 8})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "Order 7 is refunded." if i % 2 else f"Done ({i})."}]}


# A judge factory that also appends this process's id to log_path: one line per judge built, naming its actor.
def counted_judge(model_dir: str, log_path: str):
    with open(log_path, "a") as log:
        log.write(f"{os.getpid()}\n")
    return rubrics.EmbeddedJudge(model=model_dir, method="choice")


@pytest.fixture(scope="module")
def local_cluster():
    # Ray ships functions by reference: this test module is not importable in the workers, so send it by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_map_batches_grades_every_row_with_one_judge_per_actor(local_cluster, tmp_path):
    import functools

    model_dir = str(tiny_judge_model(str(tmp_path / "judge")))
    log_path = str(tmp_path / "judges.log")
    rows = [{"trajectory": json.dumps(trajectory(i)), "shard": i} for i in range(8)]
    dataset = ray.data.from_items(rows)
    factory = functools.partial(counted_judge, model_dir, log_path)
    graded = grade_dataset(dataset, RUBRIC, judge=factory, concurrency=2, batch_size=2).take_all()

    judge = rubrics.EmbeddedJudge(model=model_dir, method="choice")
    by_shard = {row["shard"]: row for row in graded}
    assert sorted(by_shard) == list(range(8))
    for i, row in by_shard.items():
        expected = rubrics.score(trajectory(i), RUBRIC, judge=judge)
        result, want = json.loads(row["rubric_result"]), expected.to_dict()
        # How many prompt tokens came from the prefix cache depends on what each judge had seen before.
        for usage in (result["judge_usage"], want["judge_usage"]):
            del usage["cached_tokens"]
        assert result == want
        assert row["rubric_score"] == expected.score and row["rubric_reward"] == expected.score
        assert row["rubric_complete"] and row["trajectory"] == rows[i]["trajectory"]
    scores = {row["rubric_score"] for row in graded}
    assert 0.0 in scores and len(scores) >= 2   # the gate fails on order 8; the others earn points
    builds = open(log_path).read().split()
    assert 1 <= len(builds) <= 2 and len(set(builds)) == len(builds)   # 4 batches, at most one judge per actor


def test_a_batch_in_either_format_gets_the_result_columns_and_incomplete_raises_by_default():
    import pandas as pd

    no_judge = RubricGrader(RUBRIC, judge="none", on_error="nan")
    frame = pd.DataFrame({"trajectory": [json.dumps(trajectory(1)), json.dumps(trajectory(2))]})
    out = no_judge(frame)
    assert list(out.columns) == ["trajectory", "rubric_score", "rubric_reward", "rubric_complete", "rubric_result"]
    assert out["rubric_complete"].tolist() == [False, False] and out["rubric_reward"].isna().all()
    assert json.loads(out["rubric_result"][0])["items"][2]["status"] == "error"

    import numpy as np
    code_only = RUBRIC.replace("  - {id: polite, points: 1, judge: the reply is polite}\n", "")
    batch = {"trajectory": np.array([trajectory(1), trajectory(3)], dtype=object), "rubric": np.array([code_only] * 2)}
    out = RubricGrader(rubric_column="rubric")(batch)   # each row's own rubric; code checks only, so no judge
    assert out["rubric_score"].tolist() == [1.0, 0.0] and out["rubric_reward"].tolist() == [1.0, 0.0]

    with pytest.raises(rubrics.result.IncompleteResultError, match="'t1'"):
        RubricGrader(RUBRIC, judge="none")(frame)
    with pytest.raises(ValueError, match="base_url"):
        RubricGrader(RUBRIC, judge="openai")
    with pytest.raises(KeyError, match="'trajectory' column"):
        RubricGrader(RUBRIC, judge="none")({"messages": np.array([1])})


def test_without_ray_data_grade_dataset_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.data", None)   # as if it were not installed
    with pytest.raises(rubrics.MissingExtraError, match=r"pip install 'agent-rubrics\[ray\]'"):
        grade_dataset(object(), RUBRIC)
