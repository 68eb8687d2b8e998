"""Hostile input to `rubric grade`, `score_many`, `load_trajectory` and `rubric pass-rates`.

The rule under test: one bad trajectory or line never sinks a batch, and it is reported with its file, line
(and column where there is one) and what was wrong. The CLI runs in a subprocess with code checks only, so no
judge model is loaded.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rubric_fakes import REPO, ScriptedJudge

from rubrics.judges.protocol import Verdict
from rubrics.grading.scoring import score_many
from rubrics.trajectory import MAX_NESTING, TrajectoryError, Trajectory, iter_trajectory_file, load_trajectory

RUBRIC = """\
version: 1
id: hostile
task: Say hello.
criteria:
  - {id: greets, points: 1, contains: {text: hello}}
"""
JUDGED_RUBRIC = RUBRIC + "  - {id: polite, points: 1, judge: is polite}\n"
LONG_INTEGER = "9" * 5000


def rubric_cli(*args) -> subprocess.CompletedProcess:
    """The real `rubric` command; bytes out, so that invalid UTF-8 in its output fails the test."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)], capture_output=True,
                          cwd=REPO, env=env, timeout=120)


def good(trajectory_id: str) -> str:
    return json.dumps({"id": trajectory_id, "messages": [{"role": "assistant", "content": "hello there"}]})


@pytest.fixture
def rubric_file(tmp_path: Path) -> Path:
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC)
    return path


def graded_ids(stdout: bytes) -> list[str]:
    return [json.loads(line)["trajectory_id"] for line in stdout.decode("utf-8").splitlines()]


# ------------------------------------------------------------------ D4: integers longer than 4,300 digits


def test_an_over_long_integer_is_a_load_error_of_its_line_and_the_rest_is_graded(rubric_file, tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join([good("a"), '{"id": "big", "n": ' + LONG_INTEGER + "}", good("c")]) + "\n")
    done = rubric_cli("grade", rubric_file, runs, "--format", "jsonl")
    assert done.returncode == 1
    assert graded_ids(done.stdout) == ["a", "c"]
    stderr = done.stderr.decode()
    assert f"{runs}:2: error: column 20: integer literal of 5000 digits" in stderr, stderr
    assert "Traceback" not in stderr


def test_score_many_and_load_trajectory_report_an_over_long_integer_with_its_position(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join([good("a"), '{"id": "big", "n": ' + LONG_INTEGER + "}"]) + "\n")
    first, second = score_many([runs], RUBRIC)
    assert first.complete and second.items == []
    assert second.errors and f"{runs}:2: column 20: integer literal" in second.errors[0]
    with pytest.raises(TrajectoryError, match=r"<text>:1: column 8: integer literal of 5000 digits"):
        load_trajectory('{"n": ' + " " + LONG_INTEGER + "}")


def test_an_over_long_integer_in_a_json_file_names_its_line(tmp_path):
    path = tmp_path / "one.json"
    path.write_text('{\n  "id": "a",\n  "n": -' + LONG_INTEGER + "\n}\n")
    with pytest.raises(TrajectoryError, match=r"one\.json:3: column 8: integer literal of 5000 digits"):
        load_trajectory(path)


def test_a_long_run_of_digits_inside_a_string_is_fine():
    assert load_trajectory({"id": "a", "metadata": {"n": LONG_INTEGER}}).metadata["n"] == LONG_INTEGER
    assert load_trajectory('{"id": "a", "metadata": {"n": "' + LONG_INTEGER + '"}}').metadata["n"] == LONG_INTEGER


# ------------------------------------------------------------------ D5: lone surrogates


@pytest.mark.parametrize("fmt", ["jsonl", "json", "table"])
def test_a_lone_surrogate_in_an_id_is_escaped_in_every_format(rubric_file, tmp_path, fmt):
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"id": "odd\\ud800id", "messages": []}\n' + good("fine") + "\n")
    out = tmp_path / "out.txt"
    printed = rubric_cli("grade", rubric_file, runs, "--format", fmt)
    written = rubric_cli("grade", rubric_file, runs, "--format", fmt, "--output", out)
    assert printed.returncode == written.returncode == 0, printed.stderr
    for text in (printed.stdout.decode("utf-8"), out.read_bytes().decode("utf-8")):   # strict UTF-8
        if fmt == "table":
            assert "odd\\ud800id" in text and "fine" in text
        else:
            rows = [json.loads(line) for line in text.splitlines()] if fmt == "jsonl" else json.loads(text)
            assert [row["trajectory_id"] for row in rows] == ["odd\\ud800id", "fine"]


# ------------------------------------------------------------------ D6: invalid UTF-8


def test_an_invalid_utf8_line_is_reported_alone_and_the_other_lines_are_graded(rubric_file, tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(b"\n".join([good("a").encode(), b'{"id": "x\xff"}', good("c").encode()]) + b"\n")
    done = rubric_cli("grade", rubric_file, runs, "--format", "jsonl")
    assert done.returncode == 1
    assert graded_ids(done.stdout) == ["a", "c"]
    assert f"{runs}:2: error: column 10: invalid UTF-8 (byte 0xff" in done.stderr.decode()


def test_a_non_utf8_byte_in_a_json_file_names_its_line_and_column(tmp_path):
    path = tmp_path / "one.json"
    path.write_bytes(b'{\n  "id": "a",\n  "x": "ok\xfe"\n}\n')
    [entry] = iter_trajectory_file(path)
    assert entry.source == f"{path}:3"
    assert entry.message.startswith("column 11: invalid UTF-8 (byte 0xfe")


def test_a_line_separator_inside_a_string_does_not_split_a_jsonl_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({"id": "a", "final_answer": "one\u2028two\x85three"}, ensure_ascii=False) + "\n"
                    + good("b") + "\n", encoding="utf-8")
    first, second = iter_trajectory_file(path)
    assert first.final_answer == "one\u2028two\x85three" and second.source == f"{path}:2"


# ------------------------------------------------------------------ deep nesting


def test_nesting_deeper_than_the_limit_is_a_positioned_error_in_a_json_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{\n  "id": "d",\n  "x": ' + "[" * 6000 + "]" * 6000 + "\n}\n")
    [entry] = iter_trajectory_file(path)
    assert entry.source == f"{path}:3"
    assert entry.message == f"column {8 + MAX_NESTING - 1}: nested deeper than {MAX_NESTING} levels"


def test_nesting_just_past_the_limit_is_refused_and_just_under_it_loads(tmp_path):
    path = tmp_path / "runs.jsonl"
    under = MAX_NESTING - 1   # the object itself is one level
    path.write_text('{"x": ' + "[" * under + "]" * under + "}\n" + '{"x": ' + "[" * MAX_NESTING + "]" * MAX_NESTING
                    + "}\n")
    ok, refused = iter_trajectory_file(path)
    assert isinstance(ok, Trajectory)
    assert refused.source == f"{path}:2" and "nested deeper than" in refused.message


def test_deep_nesting_in_cli_input_never_raises_recursion_error(rubric_file, tmp_path):
    runs = tmp_path / "runs.jsonl"
    deep_arguments = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"   # a string that decodes to deep JSON
    runs.write_text("\n".join([good("a"), '{"x": ' + "{\"k\": " * 6000 + "1" + "}" * 6000 + "}",
                               json.dumps({"id": "args", "messages": [{"role": "assistant", "content": "hello",
                                            "tool_calls": [{"function": {"name": "f", "arguments": deep_arguments}}]}]})]))
    done = rubric_cli("grade", rubric_file, runs, "--format", "jsonl")
    assert graded_ids(done.stdout) == ["a", "args"]
    assert f"{runs}:2: error: column " in done.stderr.decode() and "RecursionError" not in done.stderr.decode()


def test_an_id_less_dict_nested_near_the_interpreter_limit_is_a_clear_error():
    deep: list = []
    for _ in range(sys.getrecursionlimit()):
        deep = [deep]
    with pytest.raises(TrajectoryError, match=r"nested too deeply to derive an id.*give it an 'id'"):
        load_trajectory({"messages": [], "metadata": {"x": deep}})
    [result] = score_many([{"messages": [], "metadata": {"x": deep}}], RUBRIC)
    assert "nested too deeply" in result.errors[0]


# ------------------------------------------------------------------ terminal escapes


def test_control_characters_are_escaped_in_the_table_and_kept_in_json(rubric_file, tmp_path):
    runs = tmp_path / "runs.jsonl"
    sneaky = "\x1b[31mRED\x1b[0m\u202eevil\x07"
    runs.write_text(json.dumps({"id": sneaky, "messages": [{"role": "assistant", "content": "\x1b]0;title\x07"}]})
                    + "\n")
    table = rubric_cli("grade", rubric_file, runs, "--verbose")
    shown = table.stdout.decode("utf-8")
    assert "\\x1b[31mRED\\x1b[0m\\u202eevil\\x07" in shown
    assert not any(c in shown for c in "\x1b\x07\u202e")
    as_json = rubric_cli("grade", rubric_file, runs, "--format", "json")
    assert json.loads(as_json.stdout)[0]["trajectory_id"] == sneaky


def test_control_characters_in_load_errors_are_escaped_on_stderr(rubric_file, tmp_path):
    runs = tmp_path / "bad\x1b[2Jname.jsonl"
    runs.write_text("{not json\n")
    done = rubric_cli("grade", rubric_file, runs)
    assert "bad\\x1b[2Jname.jsonl:1: error:" in done.stderr.decode() and b"\x1b" not in done.stderr


# ------------------------------------------------------------------ non-finite probabilities from any judge


def test_a_judge_probability_that_is_not_finite_becomes_an_error_item():
    verdicts = iter([Verdict(met=False, probability=float("nan")), Verdict(met=True, probability=float("inf")),
                     Verdict(met=True, probability=1.5), Verdict(met=True, probability=0.9)])
    judge = ScriptedJudge(lambda request: next(verdicts))
    results = score_many([json.loads(good(name)) for name in "abcd"], JUDGED_RUBRIC, judge=judge)
    statuses = [[item.status for item in result.items] for result in results]
    assert statuses == [["met", "error"]] * 3 + [["met", "met"]]
    assert "nan" in results[0].items[1].error and results[0].items[1].probability is None
    assert not results[0].complete
    for result in results:
        json.loads(json.dumps(result.to_dict(), allow_nan=False))


# ----------------------------------------------------------------- rubric pass-rates


def test_pass_rates_skips_hostile_result_lines_with_their_line_numbers(tmp_path):
    from delivery_factory import make_task, result_line

    from rubrics.delivery.runs.graded_results import read_results

    root = tmp_path / "delivery"
    make_task(root / "tasks" / "t1")
    results = tmp_path / "results.jsonl"
    lines = [result_line("t1", "t1/a1", 1.0).encode(),
             b'{"trajectory_id": "t1/a2", "task_id": "t1", "score": ' + LONG_INTEGER.encode() + b"}",
             b'{"trajectory_id": "t1/a3\xff", "task_id": "t1", "score": 1}',
             b'{"trajectory_id": "t1/a4", "task_id": "t1", "score": NaN}',
             b'{"x": ' + b"[" * 6000 + b"]" * 6000 + b"}",
             result_line("t1", "t1/a\ud800", 0.0).encode()]
    results.write_bytes(b"\n".join(lines) + b"\n")
    read = read_results(results)
    assert [a.trajectory_id for a in read.attempts] == ["t1/a1", "t1/a\\ud800"]
    assert [p.split(": ")[0] for p in read.problems] == [f"{results}:{n}" for n in (2, 3, 4, 5)]
    assert "integer literal" in read.problems[0] and "invalid UTF-8" in read.problems[1]
    assert "nested deeper" in read.problems[3]
    done = rubric_cli("pass-rates", root, "--results", results, "--attempts", "2")
    assert done.returncode == 0, done.stderr
    done.stdout.decode("utf-8")
    assert f"{results}:2: " in done.stderr.decode()
    json.loads((root / "pass_rates.json").read_text(encoding="utf-8"), parse_constant=reject_constant)


def reject_constant(name: str):
    raise AssertionError(f"{name} is not JSON")


# ------------------------------------------------------------------ judge-eval labels


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"trajectory": {"id": "a"}, "item_id": "x", "met": true, "n": ' + b"[" * 6000 + b"]" * 6000 + b"}",
     r"labels\.jsonl:2: .*column \d+: nested deeper than"),
    (b'{"trajectory": "a\xff.json", "item_id": "x", "met": true}', r"labels\.jsonl:2: column 18: invalid UTF-8"),
])
def test_a_hostile_labels_line_is_a_labels_error_with_its_position(tmp_path, line, expected):
    from rubrics.trust import LabelsError, load_labels

    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(b'{"trajectory": {"id": "a"}, "item_id": "x", "met": true}\n' + line + b"\n")
    with pytest.raises(LabelsError, match=expected):
        load_labels(labels)


@pytest.mark.parametrize("bad_element", ['{"deep": ' + "[" * 5001 + "]" * 5001 + ', "messages": []}',
                                         '{"big": ' + "9" * 4301 + ', "messages": []}'])
def test_one_bad_element_of_a_json_array_costs_only_itself(tmp_path, bad_element):
    path = tmp_path / "many.json"
    path.write_text('[\n{"id": "first", "messages": []},\n' + bad_element + ',\n{"id": "third", "messages": []}\n]')
    outcomes = list(iter_trajectory_file(path))
    assert [type(o).__name__ for o in outcomes] == ["Trajectory", "TrajectoryLoadError", "Trajectory"]
    assert [o.id for o in outcomes[::2]] == ["first", "third"]
    assert str(outcomes[1]).startswith(f"{path}:3")


def test_a_line_of_no_break_spaces_is_a_bad_line_not_a_blank_one(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"id": "a", "messages": []}\n\u00a0\u00a0\n\n', encoding="utf-8")
    outcomes = list(iter_trajectory_file(path))
    assert [type(o).__name__ for o in outcomes] == ["Trajectory", "TrajectoryLoadError"]
    assert str(outcomes[1]).startswith(f"{path}:2")
