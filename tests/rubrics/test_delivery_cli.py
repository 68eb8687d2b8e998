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
GENERATED = ("pass_rates.json", "split.json", "report.md", "report.json", "pass-rates.svg", "uplift.md", "uplift.json",
             "uplift.svg")
OLD_PASS_RATES = "calibration.json"   # pass_rates.json's name from `rubric calibrate`, the command's old name
CALIBRATE_NOTICE = ("warning: `rubric calibrate` is deprecated; use `rubric pass-rates` (the same options; it writes "
                    "pass_rates.json, formerly calibration.json)")


def rubric(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def schema(name):
    return jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text()))


def committed(name):
    return EXAMPLE / name


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """check, pass-rates, split, report on a fresh copy without the committed outputs."""
    work = tmp_path_factory.mktemp("cli") / "delivery"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns(*GENERATED, OLD_PASS_RATES))
    runs = {
        "check": rubric("tasks", "check", work),
        "pass-rates": rubric("pass-rates", work, "--results", work / "results.jsonl", "--attempts", "3", "--k", "2"),
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
    schema("pass_rates").validate(json.loads((work / "pass_rates.json").read_text()))
    schema("calibration").validate(json.loads((work / "pass_rates.json").read_text()))   # its deprecated old name
    schema("split").validate(json.loads((work / "split.json").read_text()))
    schema("delivery_report").validate(json.loads((work / "report.json").read_text()))
    task_schema = schema("task")
    for path in sorted((work / "tasks").glob("*/task.yaml")):
        task_schema.validate(yaml.safe_load(path.read_text()))


def test_outputs_equal_the_committed_example(pipeline):
    work, _ = pipeline
    for name in GENERATED:
        assert (work / name).read_text() == committed(name).read_text(), name
    assert not (work / OLD_PASS_RATES).exists()


def test_example_exercises_every_label_flag_and_a_near_twin(pipeline):
    work, runs = pipeline
    pass_rates = json.loads((work / "pass_rates.json").read_text())
    labels = {t["label"] for t in pass_rates["tasks"]}
    flags = {f["code"] for t in pass_rates["tasks"] for f in t["flags"]}
    assert labels == {"keep", "drop", "inspect"}
    assert {"too-few-attempts", "no-results"} <= flags     # the results come from real runs of tasks run
    assert len({t["category"] for t in pass_rates["tasks"]}) >= 3 and len(pass_rates["tasks"]) >= 12
    split = json.loads((work / "split.json").read_text())
    assert split["near_duplicates"]
    side = {t: "tasks" for t in split["tasks"]} | {t: "heldout" for t in split["heldout"]}
    assert all(side[p["a"]] == side[p["b"]] for p in split["near_duplicates"])
    assert "keep" in runs["pass-rates"].stdout and "pass@2" in runs["pass-rates"].stdout


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


def test_pass_rates_json_format_prints_what_it_writes(pipeline, tmp_path):
    work, _ = pipeline
    run = rubric("pass-rates", work, "--results", work / "results.jsonl", "--format", "json",
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
    assert rubric("pass-rates", tmp_path, "--results", tmp_path / "nope.jsonl").returncode == 2
    assert rubric("split", tmp_path, "--heldout", "2", "--seed", "1").returncode == 2
    assert rubric("tasks", "check", tmp_path / "nope").returncode == 2
    assert rubric("report", tmp_path, "--split", tmp_path / "nope.json").returncode == 2


def test_split_refuses_a_delivery_with_a_broken_task_yaml(tmp_path):
    make_task(tmp_path / "tasks" / "t")
    (tmp_path / "tasks" / "t" / "task.yaml").write_text("repo: x\n")
    run = rubric("split", tmp_path, "--seed", "1")
    assert run.returncode == 1 and "instruction" in run.stderr and not (tmp_path / "split.json").exists()


# ------------------------------------------------ the old names: `rubric calibrate`, calibration.json, --calibration

def test_the_old_command_calibrate_does_what_pass_rates_does_after_a_notice(pipeline, tmp_path):
    work, _ = pipeline
    options = ["--results", work / "results.jsonl", "--attempts", "3", "--k", "2"]
    new = rubric("pass-rates", work, *options, "--output", tmp_path / "new.json")
    old = rubric("calibrate", work, *options, "--output", tmp_path / "old.json")
    assert (old.returncode, old.stdout) == (new.returncode, new.stdout) == (0, new.stdout)
    assert (tmp_path / "old.json").read_text() == (tmp_path / "new.json").read_text() \
        == (work / "pass_rates.json").read_text()
    notice, *rest = old.stderr.splitlines()
    assert notice == CALIBRATE_NOTICE
    assert "\n".join(rest).replace("old.json", "new.json") == new.stderr.rstrip("\n")
    # its default output is the new file; usage errors and --help come after the notice too
    fresh = tmp_path / "fresh"
    shutil.copytree(work, fresh, ignore=shutil.ignore_patterns("pass_rates.json"))
    assert rubric("calibrate", fresh, *options).returncode == 0
    assert (fresh / "pass_rates.json").read_text() == (work / "pass_rates.json").read_text()
    assert not (fresh / OLD_PASS_RATES).exists()
    missing = rubric("calibrate", work)
    assert missing.returncode == 2 and missing.stderr.splitlines()[0] == CALIBRATE_NOTICE
    assert "--results" in missing.stderr
    helped = rubric("calibrate", "--help")
    assert helped.returncode == 0 and helped.stderr.strip() == CALIBRATE_NOTICE
    assert helped.stdout == rubric("pass-rates", "--help").stdout


def test_the_old_command_is_listed_nowhere_but_pass_rates_is(pipeline):
    listed = rubric("--help")
    assert "pass-rates" in listed.stdout and "calibrate" not in listed.stdout
    unknown = rubric("calibrat", "x")
    assert unknown.returncode == 2 and "pass-rates" in unknown.stderr and "'calibrate'" not in unknown.stderr


def test_report_reads_an_old_calibration_json_after_a_notice_and_writes_the_same_report(pipeline, tmp_path):
    work, _ = pipeline
    old = tmp_path / "old"
    shutil.copytree(work, old, ignore=shutil.ignore_patterns(*GENERATED[1:]))   # pass_rates.json and split.json stay
    shutil.copy(work / "split.json", old / "split.json")
    (old / "pass_rates.json").rename(old / OLD_PASS_RATES)
    report = rubric("report", old)
    assert report.returncode == 0, report.stderr
    assert report.stderr.splitlines()[0] == (f"warning: reading {old / OLD_PASS_RATES}: calibration.json is the "
                                             "deprecated name of pass_rates.json (`rubric pass-rates` writes it); "
                                             "rename the file")
    assert "note:" not in report.stderr
    for name in ("report.md", "report.json", "pass-rates.svg"):
        assert (old / name).read_text() == (work / name).read_text(), name
    uplift = rubric("report", old, "--baseline", old / "results.jsonl",
                    "--candidate", old / "candidate-results.jsonl")
    assert uplift.returncode == 0 and "deprecated name of pass_rates.json" in uplift.stderr
    for name in ("uplift.md", "uplift.json", "uplift.svg"):
        assert (old / name).read_text() == (work / name).read_text(), name
    # where both are there the new file is read, without a notice
    shutil.copy(work / "pass_rates.json", old / "pass_rates.json")
    (old / OLD_PASS_RATES).write_text("not the pass rates")
    both = rubric("report", old, "--output-dir", tmp_path / "both")
    assert both.returncode == 0 and "warning" not in both.stderr
    assert (tmp_path / "both" / "report.json").read_text() == (work / "report.json").read_text()


def test_report_takes_the_old_calibration_option_after_a_notice(pipeline, tmp_path):
    work, _ = pipeline
    old = rubric("report", work, "--calibration", work / "pass_rates.json", "--output-dir", tmp_path / "old")
    new = rubric("report", work, "--pass-rates", work / "pass_rates.json", "--output-dir", tmp_path / "new")
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stderr.splitlines()[0] == "warning: --calibration is deprecated; use --pass-rates"
    assert "warning" not in new.stderr
    for name in ("report.md", "report.json", "pass-rates.svg"):
        assert (tmp_path / "old" / name).read_text() == (tmp_path / "new" / name).read_text() \
            == (work / name).read_text(), name
    assert rubric("report", work, "--calibration", tmp_path / "nope.json").returncode == 2
