from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import get_check, run_check, validate_config


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


TRAJECTORY = make_trajectory(
    messages=[
        call("drive.search", query="Q3 travel", limit=10),
        call("drive.read", file_id="sheet-1"),
        call("drive.read", file_id="sheet-2"),
        call("send_email", to=["cfo@acme.test", "ops@acme.test"], subject="Q3 MIS", urgent=True),
    ]
)


def run(**config):
    return run_check("tool_called", config, TRAJECTORY)


def test_name_glob_and_default_range():
    outcome = run(name="drive.*")
    assert outcome.met and outcome.evidence == "3 calls to 'drive.*' (allowed 1..∞)"
    assert not run(name="Drive.*").met  # tool names are case-sensitive


def test_min_and_max():
    assert run(name="drive.read", min=2, max=2).met
    outcome = run(name="drive.read", max=1)
    assert not outcome.met and outcome.evidence == "2 calls to 'drive.read' (allowed 1..1)"
    assert run(name="delete_*", min=0, max=0).met


def test_args_equal_or_glob():
    assert run(name="drive.read", args={"file_id": "sheet-2"}).met
    assert run(name="drive.read", args={"file_id": "sheet-*"}, min=2).met
    assert run(name="drive.search", args={"limit": 10}).met
    assert not run(name="drive.search", args={"limit": "1?0"}).met
    assert run(name="drive.search", args={"limit": "1?"}).met  # a string rubric value globs the JSON text of a number
    assert run(name="send_email", args={"to": "cfo@*"}).met  # a scalar matches any item of a list argument
    assert run(name="send_email", args={"urgent": True}).met
    assert not run(name="send_email", args={"urgent": 1}).met  # JSON true is not 1


def test_unmet_lists_the_tools_that_were_called():
    outcome = run(name="slack.*")
    assert not outcome.met
    assert outcome.evidence == "0 calls to 'slack.*' (allowed 1..∞); tools called: drive.read ×2, drive.search ×1, send_email ×1"
    outcome = run(name="drive.read", args={"file_id": "sheet-9"})
    assert 'with args {"file_id": "sheet-9"}' in outcome.evidence


def test_config_validation_and_lint():
    with pytest.raises(ValidationError, match="max \\(1\\) is below min \\(2\\)"):
        validate_config("tool_called", {"name": "x", "min": 2, "max": 1})
    with pytest.raises(ValidationError):
        validate_config("tool_called", {"name": "x", "min": -1})
    with pytest.raises(ValidationError, match="Extra inputs"):
        validate_config("tool_called", {"name": "x", "arguments": {}})
    spec = get_check("tool_called")
    config = spec.config_model.model_validate({"name": "drive.[read", "args": {"file_id": "sheet-[1"}})
    assert [(c, m.split(":")[0]) for _, c, m in spec.lint(config)] == [("invalid-glob", "name"), ("invalid-glob", "args.file_id")]


SQL = make_trajectory(messages=[call("db.query", query="delete from orders where id = 7"),
                                call("db.query", query="SELECT * FROM orders")])


def test_args_globs_are_case_sensitive_unless_told_otherwise():
    assert not run_check("tool_called", {"name": "db.*", "args": {"query": "*DELETE*"}}, SQL).met   # the default
    assert run_check("tool_called", {"name": "db.*", "args": {"query": "*DELETE*"}, "case_sensitive": False}, SQL).met
    assert run_check("tool_called", {"name": "db.query", "args": {"query": "select * from ORDERS"},
                                     "case_sensitive": False}, SQL).met            # exact text, folded
    assert not run_check("tool_called", {"name": "DB.*", "case_sensitive": False}, SQL).met   # names stay exact
    assert run_check("tool_called", {"name": "db.*", "args": {"query": "*delete*"}}, SQL).met
    with pytest.raises(ValidationError):
        validate_config("tool_called", {"name": "db.*", "case_sensitive": "maybe"})


def test_a_case_insensitive_penalty_catches_a_lower_case_delete_through_the_cli(tmp_path):
    import json
    import subprocess
    import sys

    from rubric_fakes import REPO

    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        "version: 1\nid: no-deletes\ntask: report on orders\ncriteria:\n"
        "  - {id: reads, points: 1, tool_called: {name: db.query}}\n"
        "  - {id: deletes, points: -2, tool_called: {name: db.query, args: {query: \"*DELETE*\"}, "
        "case_sensitive: false}}\n")
    trajectory = tmp_path / "t.json"
    trajectory.write_text(json.dumps({"id": "t", "messages": [
        {"role": "user", "content": "report"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "name": "db.query", "arguments": {"query": "delete from orders"}}]}]}))
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "grade", str(rubric), str(trajectory),
                           "--format", "jsonl"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    result, = [json.loads(line) for line in done.stdout.splitlines()]
    penalty, = [item for item in result["items"] if item["id"] == "deletes"]
    assert penalty["status"] == "met" and result["earned"] == -1, result
