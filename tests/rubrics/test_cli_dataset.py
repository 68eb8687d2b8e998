"""`rubric grade --dataset FILE.jsonl`: a rubric per line, inline or by path; a bad line costs only itself."""
import json
import os
import subprocess
import sys

from rubric_fakes import REPO, trajectory

RUBRIC_A = {"version": 1, "id": "a", "task": "t", "criteria": [
    {"id": "says-yes", "points": 2, "contains": {"text": "yes"}, "tags": ["axis:accuracy"]},
    {"id": "says-no", "points": -1, "contains": {"text": "no"}}]}
RUBRIC_B_YAML = """version: 1
id: b
task: t
criteria:
  - {id: called, points: 1, tool_called: {name: refund_order, args: {amount: {number: 84.5, tolerance: 0.01}}}}
"""


def rubric(*args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)


def write_dataset(tmp_path):
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "b.yaml").write_text(RUBRIC_B_YAML)
    (tmp_path / "runs").mkdir()
    refund = {"id": "refund", "messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"name": "refund_order", "arguments": {"amount": "84.50"}}]}]}
    (tmp_path / "runs" / "refund.json").write_text(json.dumps(refund))
    lines = [
        json.dumps({"trajectory": trajectory("yes", id="t1"), "rubric": RUBRIC_A}),
        json.dumps({"trajectory": "runs/refund.json", "rubric": "rubrics/b.yaml"}),
        "{not json",
        json.dumps({"trajectory": trajectory("yes", id="t4"), "rubric": "rubrics/missing.yaml"}),
        json.dumps({"trajectory": {"id": "t5", "messages": 7}, "rubric": RUBRIC_A}),
        json.dumps({"trajectory": trajectory("yes no", id="t6")}),
        json.dumps({"trajectory": [{"role": "assistant", "content": "yes"}], "rubric": "rubrics/b.yaml"}),
        json.dumps({"trajectory": trajectory("x", id="t8"), "rubric": {**RUBRIC_A, "criteria": [{"id": "z"}]}}),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_dataset_grades_each_line_with_its_rubric_and_reports_bad_lines(tmp_path):
    path = write_dataset(tmp_path)
    done = rubric("grade", "--dataset", path, "--format", "jsonl")
    assert done.returncode == 1   # some lines could not be used
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["trajectory_id"], r["rubric_id"], r["earned"], r["total"]) for r in rows] == [
        ("t1", "a", 2, 2), ("refund", "b", 1, 1), ("data:7", "b", 0, 1)]
    assert rows[0]["tags"]["axis:accuracy"]["score"] == 1.0
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert [e.split(": error: ")[0] for e in errors] == [f"{path}:{n}" for n in (3, 4, 5, 6, 8)]
    assert "invalid JSON" in errors[0]
    assert "field rubric: no such rubric file" in errors[1]
    assert "field trajectory: field messages" in errors[2]
    assert "field rubric: missing" in errors[3]
    assert "field rubric:" in errors[4] and "criteria[0]" in errors[4]
    assert "5 trajectory input(s) could not be loaded; 3 graded" in done.stderr


def test_dataset_usage_errors(tmp_path):
    path = write_dataset(tmp_path)
    assert "give no RUBRIC" in rubric("grade", "r.yaml", "--dataset", path).stderr
    assert "give RUBRIC and at least one" in rubric("grade", "r.yaml").stderr
    assert "--aggregate needs --format table or json" in rubric("grade", "--dataset", path, "--aggregate",
                                                                "healthbench", "--format", "jsonl").stderr
