"""The `rubric` command in a subprocess, on the examples."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from rubric_fakes import EXAMPLE_DIR, EXAMPLE_RUBRIC, REPO

TRAJECTORIES = EXAMPLE_DIR / "trajectories"
DETERMINISTIC = """\
version: 1
id: det
task: Send the MIS to the CFO.
gates:
  - {id: mis-to-cfo, email_sent: {to: cfo@acme.test, attachment: "*MIS*"}}
criteria:
  - {id: total, points: 2, number: {label: total travel spend, expected: 48.2L, tolerance: 0.5%}}
  - {id: others, points: -1, email_sent: {to_other_than: [cfo@acme.test]}}
"""


def rubric(*args, cwd=REPO):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


@pytest.fixture
def det_rubric(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(DETERMINISTIC)
    return path


def test_grade_jsonl_one_line_per_trajectory_in_input_order(det_rubric):
    files = sorted(TRAJECTORIES.glob("*.json"))
    done = rubric("grade", det_rubric, files[3], files[0], TRAJECTORIES / "05-indian-grouping.json", "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["trajectory_id"] for r in rows] == ["wrong-recipient", "all-gates-pass", "indian-grouping"]
    assert [r["score"] for r in rows] == [0.0, 1.0, 1.0]
    assert rows[0]["gates_passed"] is False and rows[0]["earned"] == 1 and rows[0]["complete"] is True
    assert set(rows[1]) >= {"trajectory_id", "task_id", "rubric_id", "score", "gates_passed", "earned", "total",
                            "complete", "items", "errors", "judge"}


def test_grade_directory_json_and_output_file(det_rubric, tmp_path):
    out = tmp_path / "results.json"
    done = rubric("grade", det_rubric, TRAJECTORIES, "--format", "json", "--output", out)
    assert done.returncode == 0 and done.stdout == ""
    results = json.loads(out.read_text())
    assert len(results) == 8 and results[0]["trajectory_id"] == "all-gates-pass"   # sorted file order


def test_grade_table(det_rubric):
    done = rubric("grade", det_rubric, TRAJECTORIES / "01-all-gates-pass.json", TRAJECTORIES / "04-wrong-recipient.json")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["trajectory", "score", "expected", "range", "uncertain", "gates", "earned/total",
                                "complete"]
    assert lines[1].split() == ["all-gates-pass", "1.000", "1.000", "1.000-1.000", "0", "pass", "2/2", "yes"]
    assert lines[2].split() == ["wrong-recipient", "0.000", "0.000", "0.000-0.000", "0", "FAIL", "1/2", "yes"]
    verbose = rubric("grade", det_rubric, TRAJECTORIES / "01-all-gates-pass.json", "--verbose").stdout
    assert "  mis-to-cfo" in verbose and "met" in verbose and "cfo@acme.test" in verbose


def test_judge_none_reports_judge_items_as_not_evaluated_and_the_score_as_incomplete():
    done = rubric("grade", EXAMPLE_RUBRIC, TRAJECTORIES / "01-all-gates-pass.json", "--judge", "none")
    assert done.returncode == 1
    assert "NO" in done.stdout.splitlines()[1] and "incomplete" in done.stdout
    jsonl = rubric("grade", EXAMPLE_RUBRIC, TRAJECTORIES / "01-all-gates-pass.json", "--judge", "none",
                   "--format", "jsonl")
    row = json.loads(jsonl.stdout)
    assert row["complete"] is False and row["judge"] == "none"
    judged = [i for i in row["items"] if i["method"] == "judge"]
    assert len(judged) == 5 and all(i["status"] == "error" and "not evaluated" in i["error"] for i in judged)
    assert "incomplete" in jsonl.stderr


def test_malformed_trajectory_in_a_directory(det_rubric, tmp_path):
    folder = tmp_path / "trajs"
    shutil.copytree(TRAJECTORIES, folder)
    (folder / "00-broken.json").write_text('{"id": "x", "messages": [')
    (folder / "09-batch.jsonl").write_text('{"id": "ok-1", "final_answer": "Total travel spend: 48.2L"}\n'
                                            '{"id": "bad", "messages": 7}\n')
    done = rubric("grade", det_rubric, folder, "--format", "jsonl")
    assert done.returncode == 1
    ids = [json.loads(line)["trajectory_id"] for line in done.stdout.splitlines()]
    assert len(ids) == 9 and "ok-1" in ids and "bad" not in ids
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert any(line.startswith(f"{folder / '00-broken.json'}:1: error: ") for line in errors), done.stderr
    assert any(line.startswith(f"{folder / '09-batch.jsonl'}:2: error: ") and "messages" in line for line in errors)
    assert "Traceback" not in done.stderr


def test_a_trajectory_path_that_does_not_exist_prints_only_its_error(det_rubric, tmp_path):
    """Nothing loaded: no table header on stdout beside the error; the JSON formats still write strict JSON."""
    missing = tmp_path / "missing-file.json"
    done = rubric("grade", det_rubric, missing)
    assert (done.returncode, done.stdout) == (1, "")
    assert f"{missing}: error: no such file or directory" in done.stderr
    as_json = rubric("grade", det_rubric, missing, "--format", "json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout) == []
    as_jsonl = rubric("grade", det_rubric, missing, "--format", "jsonl")
    assert (as_jsonl.returncode, as_jsonl.stdout) == (1, "")


def test_missing_path_and_invalid_rubric(det_rubric, tmp_path):
    done = rubric("grade", det_rubric, tmp_path / "nope.json")
    assert done.returncode == 1 and "nope.json: error: no such file" in done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(DETERMINISTIC.replace("points: 2", "points: 0"))
    done = rubric("grade", bad, TRAJECTORIES)
    assert done.returncode == 1 and f"{bad}:7:25: error: criteria[0].points" in done.stderr and "[zero-points]" in done.stderr
    assert done.stdout == ""


def test_usage_errors_exit_2(det_rubric):
    assert rubric("grade", det_rubric).returncode == 2
    assert rubric("grade", det_rubric, TRAJECTORIES, "--format", "xml").returncode == 2
    done = rubric("grade", EXAMPLE_RUBRIC, TRAJECTORIES, "--judge", "openai")
    assert done.returncode == 2 and "--base-url" in done.stderr
    assert rubric("frobnicate").returncode == 2


def test_lint_and_schema_commands():
    assert rubric("lint", EXAMPLE_RUBRIC).returncode == 0
    done = rubric("schema", "rubric")
    assert done.returncode == 0 and json.loads(done.stdout)["title"] == "Rubric"
    assert json.loads(rubric("schema", "result").stdout)["title"] == "Result"
    assert json.loads(rubric("schema", "trajectory").stdout)["title"] == "Trajectory"


def test_installed_entry_point_runs():
    exe = shutil.which("rubric", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the rubric console script is not installed next to this interpreter")
    done = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and "rubric" in done.stdout


def test_start_up_imports_nothing_heavy(det_rubric):
    code = ("import sys; from rubrics.cli.main import main; "
            f"main(['grade', {str(det_rubric)!r}, {str(TRAJECTORIES)!r}, '--format', 'jsonl', '-o', {os.devnull!r}]); "
            "main(['lint', {0!r}]); ".format(str(EXAMPLE_RUBRIC)) +
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'numpy', 'httpx', "
            "'rich', 'judge_engine', 'jsonschema'}); print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.strip() == "[]", done.stderr


def test_command_modules_are_appended_by_name():
    from rubrics.cli import main

    assert main.COMMAND_MODULES[:3] == ["grade", "lint", "schema"]
    parser = main.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert {"grade", "lint", "schema"} <= set(commands)


def test_embedded_judge_without_the_engine_extra(tmp_path):
    # What a core-only install looks like: torch cannot be imported.
    code = ("import sys; sys.modules['torch'] = None; from rubrics.cli.main import main; "
            f"sys.exit(main(['grade', {str(EXAMPLE_RUBRIC)!r}, {str(TRAJECTORIES / '01-all-gates-pass.json')!r}, "
            "'--format', 'jsonl']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 1
    assert "pip install 'agent-rubrics[engine]'" in done.stderr and "Traceback" not in done.stderr
    row = json.loads(done.stdout)
    assert [i["status"] for i in row["items"] if i["method"] == "code"] == ["met", "met", "unmet"]
    judged = [i for i in row["items"] if i["method"] == "judge"]
    assert judged and all("pip install 'agent-rubrics[engine]'" in i["error"] for i in judged)


def test_empty_directory_is_an_error(det_rubric, tmp_path):
    (tmp_path / "empty").mkdir()
    done = rubric("grade", det_rubric, tmp_path / "empty", TRAJECTORIES / "01-all-gates-pass.json")
    assert done.returncode == 1 and "no .json or .jsonl files" in done.stderr and "all-gates-pass" in done.stdout


def test_lint_on_hostile_files_reports_without_a_traceback(tmp_path):
    contents = ["", "~", "[1, 2", "a: &x [*x]\n", "!!python/object/apply:os.system [echo]\n", "\x00\x1f",
                "version: 1\nid: r\ntask: t\ncriteria: {a: 1}\n", "- just\n- a list\n", "key: value\nkey: again\n"]
    paths = []
    for i, text in enumerate(contents):
        path = tmp_path / f"case{i}.rubric.yaml"
        path.write_text(text)
        paths.append(path)
    (tmp_path / "binary.rubric.yaml").write_bytes(b"\xff\xfe\x00bad")
    done = rubric("lint", *paths, tmp_path / "binary.rubric.yaml")
    assert done.returncode == 1 and done.stderr == ""
    reported = {line.split(":")[0] for line in done.stdout.splitlines()}
    assert reported == {str(p) for p in paths} | {str(tmp_path / "binary.rubric.yaml")}


def test_grade_json_carries_expected_score_range_and_reward(det_rubric):
    """Code checks only: everything is certain, so expected = score = the range, and reward follows --reward."""
    for reward in ("hard", "expected"):
        done = rubric("grade", det_rubric, TRAJECTORIES / "01-all-gates-pass.json",
                      TRAJECTORIES / "04-wrong-recipient.json", "--format", "json", "--reward", reward)
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        assert [(r["score"], r["expected_score"], r["score_low"], r["score_high"], r["uncertain_items"], r["reward"])
                for r in rows] == [(1.0, 1.0, 1.0, 1.0, 0, 1.0), (0.0, 0.0, 0.0, 0.0, 0, 0.0)]


def test_incomplete_results_have_null_expected_score_and_range_in_json_and_dashes_in_the_table():
    done = rubric("grade", EXAMPLE_RUBRIC, TRAJECTORIES / "01-all-gates-pass.json", "--judge", "none",
                  "--format", "jsonl", "--reward", "expected")
    row = json.loads(done.stdout)
    assert row["complete"] is False and row["reward"] is None   # hard would be the partial score
    assert (row["expected_score"], row["score_low"], row["score_high"], row["reward"]) == (None, None, None, None)
    table = rubric("grade", EXAMPLE_RUBRIC, TRAJECTORIES / "01-all-gates-pass.json", "--judge", "none").stdout
    assert table.splitlines()[1].split()[2:5] == ["-", "-", "0"]


@pytest.mark.parametrize("band", ["0.7,0.3", "0.3", "a,b", "0.2,1.5", "nan,0.5", "0.1,0.2,0.3"])
def test_a_bad_uncertain_band_is_a_usage_error(det_rubric, band):
    done = rubric("grade", det_rubric, TRAJECTORIES / "01-all-gates-pass.json", f"--uncertain={band}")
    assert done.returncode == 2 and "LOW,HIGH" in done.stderr


def test_a_bad_reward_is_a_usage_error(det_rubric):
    done = rubric("grade", det_rubric, TRAJECTORIES / "01-all-gates-pass.json", "--reward", "soft")
    assert done.returncode == 2 and "--reward" in done.stderr


@pytest.mark.parametrize("args, message", [
    (["--judge", "panel", "--panel-member", "embedded"], "at least two --panel-member"),
    (["--judge", "panel", "--panel-member", "embedded", "--panel-member", "gpt-4"], "panel member 'gpt-4'"),
    (["--panel-member", "embedded", "--panel-member", "embedded:choice"], "--panel-member needs --judge panel"),
    (["--cache", "x.sqlite", "--no-cache"], "exclude each other"),
    (["--price-per-mtok", "0.5"], "IN,OUT"),
    (["--price-per-mtok", "-1,2"], "IN,OUT"),
])
def test_panel_cache_and_price_usage_errors(args, message):
    done = rubric("grade", EXAMPLE_RUBRIC, TRAJECTORIES / "01-all-gates-pass.json", *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


SMALL_JUDGED = """\
version: 1
id: small-judged
task: Send the Q3 travel MIS to the CFO.
judge: {uncertain: [0.0, 0.1]}
gates:
  - {id: mis-to-cfo, email_sent: {to: cfo@acme.test, attachment: "*MIS*"}}
criteria:
  - {id: total, points: 2, number: {label: total travel spend, expected: 48.2L, tolerance: 0.5%}}
  - {id: flags, points: 1, judge: flags the unsigned expense claims}
  - {id: depts, points: 1, judge: {text: breaks the spend down by department, uncertain: [0.0, 0.1]}}
"""


@pytest.mark.slow
def test_real_embedded_judge_flags_uncertain_items_and_reports_the_range(tmp_path):
    """The real path: `rubric grade` with the embedded judge in a subprocess. --uncertain 0,1 overrides the
    rubric's band (every item without its own band is uncertain), not the item's own."""
    path = tmp_path / "rubric.yaml"
    path.write_text(SMALL_JUDGED)
    done = rubric("grade", path, TRAJECTORIES / "01-all-gates-pass.json", "--uncertain", "0,1", "--reward",
                  "expected", "--format", "json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    judged = {i["id"]: i for i in row["items"] if i["method"] == "judge"}
    assert judged["flags"]["uncertain"] is True
    assert judged["depts"]["uncertain"] is (judged["depts"]["probability"] <= 0.1)
    assert row["uncertain_items"] == sum(i["uncertain"] for i in row["items"])
    assert row["score_low"] <= row["score"] <= row["score_high"]
    p = {k: i["probability"] for k, i in judged.items()}
    assert row["expected_score"] == pytest.approx((2 + p["flags"] + p["depts"]) / 4)   # gate and total are met
    assert row["reward"] == row["expected_score"]
    import jsonschema
    jsonschema.validate(row, json.loads((REPO / "schemas" / "result.schema.json").read_text()))
