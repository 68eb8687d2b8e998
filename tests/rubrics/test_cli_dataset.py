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


# ------------------------------------------------------------------------------------------ confinement and leaks

SHADOW = "root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\nsecret-token: hunter2\n"


def confined_dataset(tmp_path):
    """A dataset in data/ whose lines name files inside it, above it, absolutely, and through a symlink."""
    (tmp_path / "data" / "runs").mkdir(parents=True)
    (tmp_path / "data" / "b.yaml").write_text(RUBRIC_B_YAML)
    (tmp_path / "data" / "runs" / "t.json").write_text(json.dumps(trajectory("yes", id="inside")))
    (tmp_path / "shadow").write_text(SHADOW)
    (tmp_path / "outside.yaml").write_text(RUBRIC_B_YAML)
    (tmp_path / "data" / "escape.yaml").symlink_to(tmp_path / "outside.yaml")
    (tmp_path / "data" / "not-a-rubric.txt").write_text(SHADOW)
    (tmp_path / "data" / "config.json").write_text(json.dumps({"password": "hunter2", "api": {"key": "sk-12345"}}))
    lines = [{"trajectory": "runs/t.json", "rubric": "../../../../../../../shadow"},
             {"trajectory": "runs/t.json", "rubric": str(tmp_path / "shadow")},
             {"trajectory": "../shadow", "rubric": "b.yaml"},
             {"trajectory": "runs/t.json", "rubric": "escape.yaml"},
             {"trajectory": "runs/t.json", "rubric": "not-a-rubric.txt"},
             {"trajectory": "runs/t.json", "rubric": "config.json"},
             {"trajectory": "runs/t.json", "rubric": "b.yaml"}]
    path = tmp_path / "data" / "d.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_dataset_paths_stay_inside_its_folder_and_errors_never_echo_other_files(tmp_path):
    path = confined_dataset(tmp_path)
    done = rubric("grade", "--dataset", path, "--format", "jsonl")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    for secret in ("root:", "daemon", "hunter2", "sk-12345", "password", "secret-token"):
        assert secret not in done.stderr and secret not in done.stdout, secret
    errors = {int(line.split(":")[1]): line for line in done.stderr.splitlines() if ": error: " in line}
    folder = str((tmp_path / "data").resolve())
    for number in (1, 2, 4):
        assert f"is outside the dataset's folder {folder}" in errors[number] and "--allow-outside" in errors[number]
    assert "field trajectory: '../shadow' is outside the dataset's folder" in errors[3]
    assert "not-a-rubric.txt' is not a rubric file (" in errors[5] and "the first at line 1, column 1" in errors[5]
    assert "config.json' is not a rubric file" in errors[6] and "its content is not shown" in errors[6]
    assert 7 not in errors and [json.loads(r)["trajectory_id"] for r in done.stdout.splitlines()] == ["inside"]


def test_allow_outside_names_the_other_folders_a_dataset_may_read(tmp_path):
    path = confined_dataset(tmp_path)
    done = rubric("grade", "--dataset", path, "--allow-outside", tmp_path, "--format", "jsonl")
    errors = {int(line.split(":")[1]): line for line in done.stderr.splitlines() if ": error: " in line}
    assert 4 not in errors                                  # the symlink's target is inside the allowed folder
    assert "is outside the dataset's folder" in errors[1]     # ../ x7 climbs to /shadow: outside both folders
    assert "shadow' is not a rubric file" in errors[2] and "root:" not in done.stderr   # read now, never echoed
    assert sorted(json.loads(r)["trajectory_id"] for r in done.stdout.splitlines()) == ["inside", "inside"]
    usage = rubric("grade", RUBRIC_A_PATH(tmp_path), path, "--allow-outside", tmp_path)
    assert usage.returncode == 2 and "--allow-outside applies to the paths in --dataset files" in usage.stderr


def RUBRIC_A_PATH(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(RUBRIC_A))
    return path


def test_a_real_rubric_file_with_errors_still_shows_them(tmp_path):
    (tmp_path / "bad.yaml").write_text("version: 1\nid: bad\ntask: t\ncriteria:\n  - {id: x, points: two, "
                                       "contains: {text: a}}\n")
    (tmp_path / "t.json").write_text(json.dumps(trajectory("a", id="t")))
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"trajectory": "t.json", "rubric": "bad.yaml"}) + "\n")
    done = rubric("grade", "--dataset", path)
    assert "criteria[0].points" in done.stderr and "two" in done.stderr, done.stderr


def test_devices_and_fifos_are_refused_on_the_command_line_and_in_datasets(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    good = tmp_path / "t.json"
    good.write_text(json.dumps(trajectory("yes", id="good")))
    rubric_file = RUBRIC_A_PATH(tmp_path)
    done = rubric("grade", rubric_file, "/dev/zero", fifo, good, "--format", "jsonl")   # would hang or exhaust memory
    assert done.returncode == 1 and "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "/dev/zero: error: cannot read: it is a character device: only regular files are read" in done.stderr
    assert f"{fifo}: error: cannot read: it is a FIFO (named pipe): only regular files are read" in done.stderr
    assert [json.loads(r)["trajectory_id"] for r in done.stdout.splitlines()] == ["good"]
    as_rubric = rubric("grade", fifo, good)
    assert as_rubric.returncode == 1 and "it is a FIFO (named pipe)" in as_rubric.stderr
    for dataset in ("/dev/zero", fifo):
        done = rubric("grade", "--dataset", dataset)
        assert done.returncode == 1 and "only regular files are read" in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "d.jsonl").write_text(json.dumps({"trajectory": "fifo.json", "rubric": "a.json"}) + "\n"
                                      + json.dumps({"trajectory": "t.json", "rubric": "a.json"}) + "\n")
    done = rubric("grade", "--dataset", tmp_path / "d.jsonl", "--format", "jsonl")
    assert "it is a FIFO (named pipe)" in done.stderr and [json.loads(r)["trajectory_id"]
                                                            for r in done.stdout.splitlines()] == ["good"]
