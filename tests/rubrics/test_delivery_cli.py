"""The delivery commands as a user runs them: in a subprocess, on a copy of examples/delivery/."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from delivery_factory import make_task

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "delivery"
GENERATED = ("calibration.json", "split.json", "report.md", "report.json", "pass-rates.svg", "uplift.md", "uplift.json",
             "uplift.svg")


def rubric(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def schema(name):
    return jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text()))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """check, calibrate, split, report on a fresh copy without the committed outputs."""
    work = tmp_path_factory.mktemp("cli") / "delivery"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns(*GENERATED))
    runs = {
        "check": rubric("tasks", "check", work),
        "calibrate": rubric("calibrate", work, "--results", work / "results.jsonl", "--attempts", "3", "--k", "2"),
        "split": rubric("split", work, "--heldout", "0.2", "--seed", "7"),
        "report": rubric("report", work),
        "uplift": rubric("report", work, "--baseline", work / "results.jsonl",
                         "--candidate", work / "candidate-results.jsonl"),
    }
    return work, runs


def test_every_command_succeeds(pipeline):
    _, runs = pipeline
    for name, run in runs.items():
        assert run.returncode == 0, (name, run.stdout, run.stderr)
    assert runs["check"].stdout == ""
    assert "0 error(s)" in runs["check"].stderr


def test_outputs_validate_against_their_schemas(pipeline):
    work, _ = pipeline
    schema("calibration").validate(json.loads((work / "calibration.json").read_text()))
    schema("split").validate(json.loads((work / "split.json").read_text()))
    schema("delivery_report").validate(json.loads((work / "report.json").read_text()))
    task_schema = schema("task")
    for path in sorted((work / "tasks").glob("*/task.yaml")):
        task_schema.validate(yaml.safe_load(path.read_text()))


def test_outputs_equal_the_committed_example(pipeline):
    work, _ = pipeline
    for name in GENERATED:
        assert (work / name).read_text() == (EXAMPLE / name).read_text(), name


def test_example_exercises_every_label_flag_and_a_near_twin(pipeline):
    work, runs = pipeline
    calibration = json.loads((work / "calibration.json").read_text())
    labels = {t["label"] for t in calibration["tasks"]}
    flags = {f["code"] for t in calibration["tasks"] for f in t["flags"]}
    assert labels == {"keep", "drop", "inspect"}
    assert {"too-few-attempts", "no-results"} <= flags     # the results come from real runs of tasks run
    assert len({t["category"] for t in calibration["tasks"]}) >= 3 and len(calibration["tasks"]) >= 12
    split = json.loads((work / "split.json").read_text())
    assert split["near_duplicates"]
    side = {t: "tasks" for t in split["tasks"]} | {t: "heldout" for t in split["heldout"]}
    assert all(side[p["a"]] == side[p["b"]] for p in split["near_duplicates"])
    assert "keep" in runs["calibrate"].stdout and "pass@2" in runs["calibrate"].stdout


def test_report_excludes_removed_tasks_and_records_why(pipeline):
    work, _ = pipeline
    report = json.loads((work / "report.json").read_text())
    removed = {r["task_id"]: r["reasons"] for r in report["removed"]}
    assert removed["task-0603"] == ["already solved: 3/3 attempts pass"]
    assert removed["task-0602"][0].startswith("removed by review: hackable (sara.m)")
    assert report["split"]["removed_heldout"] == ["task-0603"] and report["split"]["heldout_shipped"] == 2
    assert {t["task_id"]: t["decision"] for t in report["tasks"]}["task-0603"] == "removed"
    assert report["provenance"]["graders"] == ["grade.sh via rubric tasks run (bwrap; 8s, 2048 MiB, 256 processes)"]
    uplift = json.loads((work / "uplift.json").read_text())
    assert uplift["heldout_tasks"] == ["task-0421", "task-0505"] and uplift["excluded_removed"] == ["task-0603"]
    overall = uplift["rows"][-1]
    assert overall["category"] == "all" and overall["pass_rate"]["low"] <= overall["pass_rate"]["value"] \
        <= overall["pass_rate"]["high"]


def test_split_is_reproducible_and_materializes_a_copy(pipeline, tmp_path):
    work, _ = pipeline
    again = rubric("split", work, "--heldout", "0.2", "--seed", "7", "--output", tmp_path / "again.json",
                   "--materialize", tmp_path / "shipped")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.json").read_text() == (work / "split.json").read_text()
    plan = json.loads((work / "split.json").read_text())
    assert sorted(p.name for p in (tmp_path / "shipped" / "heldout").iterdir()) == plan["heldout"]
    assert sorted(p.name for p in (tmp_path / "shipped" / "tasks").iterdir()) == plan["tasks"]
    # the copy is itself a delivery that passes the check
    assert rubric("tasks", "check", tmp_path / "shipped").returncode == 0


def test_calibrate_json_format_prints_what_it_writes(pipeline, tmp_path):
    work, _ = pipeline
    run = rubric("calibrate", work, "--results", work / "results.jsonl", "--format", "json",
                 "--output", tmp_path / "c.json", "--attempts", "8", "--k", "4", "--pass-threshold", "0.5")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == json.loads((tmp_path / "c.json").read_text())
    assert json.loads(run.stdout)["k"] == 4


def test_check_reports_broken_folders_and_exits_1(tmp_path):
    make_task(tmp_path / "tasks" / "ok")
    broken = make_task(tmp_path / "tasks" / "broken")
    (broken / "solution.patch").unlink()
    (broken / "tests" / "test_pass_to_pass.py").unlink()
    run = rubric("tasks", "check", tmp_path)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert f"{tmp_path}/tasks/broken/solution.patch: missing (the reference fix proves the task solvable) [missing-file]" in lines
    assert any(line.startswith(f"{tmp_path}/tasks/broken/tests: no pass-to-pass tests") for line in lines)
    assert len(lines) == 2


def test_usage_errors_exit_2(tmp_path):
    make_task(tmp_path / "tasks" / "t")
    assert rubric("calibrate", tmp_path, "--results", tmp_path / "nope.jsonl").returncode == 2
    assert rubric("split", tmp_path, "--heldout", "2", "--seed", "1").returncode == 2
    assert rubric("tasks", "check", tmp_path / "nope").returncode == 2
    assert rubric("report", tmp_path, "--split", tmp_path / "nope.json").returncode == 2


def test_split_refuses_a_delivery_with_a_broken_task_yaml(tmp_path):
    make_task(tmp_path / "tasks" / "t")
    (tmp_path / "tasks" / "t" / "task.yaml").write_text("repo: x\n")
    run = rubric("split", tmp_path, "--seed", "1")
    assert run.returncode == 1 and "instruction" in run.stderr and not (tmp_path / "split.json").exists()
