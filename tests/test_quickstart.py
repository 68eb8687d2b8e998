"""The README's first quickstart command, end to end in a subprocess, with the embedded model.

`rubric grade examples/cfo-mis/rubric.yaml examples/cfo-mis/trajectories/` must grade the CFO example with the
embedded SmolLM2-135M-Instruct judge and print scores; the JSON result validates against the published schema;
the deterministic items agree with examples/cfo-mis/expected.json whatever the judge says.
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
QUICKSTART = ["grade", "examples/cfo-mis/rubric.yaml", "examples/cfo-mis/trajectories/"]

pytestmark = pytest.mark.slow


def rubric_command(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="2")
    code = "import sys, torch; torch.set_num_threads(2); from rubrics.cli.main import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1800)


@pytest.fixture(scope="module")
def json_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart") / "results.json"
    done = rubric_command(*QUICKSTART, "--format", "json", "--output", str(out))
    assert done.returncode in (0, 1), done.stderr  # 1 only if some item errored, which the checks below forbid
    return json.loads(out.read_text()), done


def test_the_quickstart_command_prints_a_score_per_trajectory():
    done = rubric_command(*QUICKSTART)
    assert done.returncode == 0, done.stderr
    expected = json.loads((EXAMPLE / "expected.json").read_text())["trajectories"]
    for name in expected:
        trajectory = json.loads((EXAMPLE / "trajectories" / name).read_text())
        trajectory_id = trajectory.get("id") if isinstance(trajectory, dict) else None
        assert (trajectory_id or Path(name).stem) in done.stdout
    assert done.stdout.splitlines()[0].split()[:2] == ["trajectory", "score"]
    assert "incomplete" not in done.stdout  # every judge item was graded by the embedded model


def test_results_validate_against_the_schema_and_judge_items_are_graded(json_run):
    import jsonschema

    results, _ = json_run
    schema = json.loads((REPO / "schemas" / "result.schema.json").read_text())
    assert len(results) == 8
    expected = json.loads((EXAMPLE / "expected.json").read_text())["trajectories"]
    for name, result in zip(sorted(expected), results):
        jsonschema.validate(result, schema)
        assert result["complete"] and result["judge"] == "embedded:SmolLM2-135M-Instruct"
        judged = [item for item in result["items"] if item["method"] == "judge"]
        asked = [item for item in judged if item["id"] not in expected[name]["facts_missing"]]
        assert len(judged) == 5 and all(0.0 <= item["probability"] <= 1.0 for item in asked)
        assert all(item["status"] == "unmet" and item["probability"] is None
                   for item in judged if item not in asked)   # a missing fact: decided without the judge


def test_deterministic_items_agree_with_the_expected_outcomes(json_run):
    results, _ = json_run
    expected = json.loads((EXAMPLE / "expected.json").read_text())["trajectories"]
    by_order = sorted(expected)  # `rubric grade DIR` reads the directory's files in sorted order
    for name, result in zip(by_order, results):
        code = {item["id"]: item["status"] for item in result["items"] if item["method"] == "code"}
        assert code == expected[name]["items"], name
        assert result["gates_passed"] is expected[name]["gates_passed"], name
        if not expected[name]["gates_passed"]:
            assert result["score"] == 0.0
