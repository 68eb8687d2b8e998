"""`rubric grade --reward-json PATH`: the reward.json of Harbor/Terminal-Bench runners, one key, null (never 0 or
false) when the trial could not be graded fully."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rubric_fakes import REPO

import rubrics  # noqa: E402
from rubrics.integrations.reward_json import RewardJsonError, reward_document, write_reward_json  # noqa: E402

RUBRIC = """\
version: 1
id: fix
task: Fix the rounding bug.
gates:
  - {id: tests-pass, tests: {fail_to_pass: ["tests/test_totals.py::test_half_cent"]}}
criteria:
  - {id: explains, points: 2, contains: {text: rounding}}
  - {id: changelog, points: 1, file: {path: CHANGELOG.md}}
"""
JUDGED = RUBRIC + "  - {id: tidy, points: 1, judge: the diff is tidy}\n"
TRAJECTORY = {"id": "trial-1", "messages": [{"role": "assistant", "content": "Fixed the rounding of half cents."}],
              "state": {"tests": {"tests/test_totals.py::test_half_cent": "PASSED"}}}


def grade(tmp_path, rubric_text, *trajectories, extra=()):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "rubric.yaml").write_text(rubric_text)
    paths = []
    for i, trajectory in enumerate(trajectories):
        path = tmp_path / f"t{i}.json"
        path.write_text(trajectory if isinstance(trajectory, str) else json.dumps(trajectory))
        paths.append(path)
    out = tmp_path / "verifier" / "reward.json"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "grade", str(tmp_path / "rubric.yaml"),
                           *map(str, paths), "--judge", "none", "--format", "json", "--reward-json", str(out),
                           *extra], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    return done, out


def test_a_complete_result_writes_its_reward_under_one_key(tmp_path):
    done, out = grade(tmp_path, RUBRIC, TRAJECTORY)
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert json.loads(out.read_text()) == {"reward": result["reward"]} == {"reward": pytest.approx(2 / 3)}
    assert out.stat().st_mode & 0o777 == 0o644 and [p.name for p in out.parent.iterdir()] == ["reward.json"]


def test_an_unevaluated_item_or_an_unreadable_trajectory_writes_null_never_zero(tmp_path):
    done, out = grade(tmp_path / "judged", JUDGED, TRAJECTORY)
    assert done.returncode == 1 and json.loads(done.stdout)[0]["score"] == pytest.approx(2 / 4)
    assert out.read_text() == '{"reward": null}\n'

    done, out = grade(tmp_path / "broken", RUBRIC, "{not json")
    assert done.returncode == 1 and json.loads(out.read_text()) == {"reward": None}


def test_reward_json_takes_exactly_one_trajectory(tmp_path):
    done, out = grade(tmp_path, RUBRIC, TRAJECTORY, {**TRAJECTORY, "id": "trial-2"})
    assert done.returncode == 2 and "--reward-json: reward.json holds one trial's reward" in done.stderr
    assert not out.exists()
    with pytest.raises(RewardJsonError, match="got 0"):
        reward_document([])


def test_the_writer_replaces_an_old_file_whole(tmp_path):
    result = rubrics.score(TRAJECTORY, RUBRIC, reward="expected")
    target = tmp_path / "reward.json"
    target.write_text('{"reward": 0.0, "stale": true}')
    write_reward_json(target, [result])
    assert json.loads(target.read_text()) == {"reward": result.expected_score}
