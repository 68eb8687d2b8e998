"""Issue 37, kept as tests: the package under test forges its grade from inside pytest's own process, either
by rewriting every report to "passed" (forge A) or by writing a JUnit file naming every test passed and exiting
0 at import (forge B). The harness's result channel, a pipe only pytest's harness plugin writes to (signed with
a key read before any attempt code runs), decides instead; `tasks validate` plants forge B in every module of
the start and flags a grader it fools. Real sandbox, real grade.sh, real pytest."""
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys

from sandbox_support import EXAMPLE, TIMEOUT, needs_bwrap, rubric
from test_sandbox_hostile import START_0417, make_patch

from rubrics.delivery.runs.channel_outcomes import channel_verdict
from rubrics.delivery.sandbox import result_channel
from rubrics.delivery.sandbox.inprocess_probe import plant_in_process_forge
from rubrics.delivery.sandbox.result_channel import ResultChannel
from rubrics.delivery.sandbox.shadow_probe import FORGE

# Forge A: pytest's reports rewritten from inside, at import; pytest then writes a JUnit file and a summary
# saying every test passed, and exits 0.
REPORT_REWRITE = '''import _pytest.reports as _reports

_made = _reports.TestReport.from_item_and_call.__func__


def _passed(cls, item, call):
    report = _made(cls, item, call)
    report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_passed)
'''
# Forge B is the shadow probe's forge, run at import of the package under test instead of in place of pytest:
# a JUnit file naming every hidden test passed, "4 passed" printed, os._exit(0) before any test runs.
EXIT_AT_IMPORT = FORGE
INIT = "from invoicekit import _forge  # noqa\n"
# A grader that runs pytest in a bare environment: the harness's plugin never loads, so the report decides.
BARE_GRADE = """#!/usr/bin/env bash
set -u
cd /repo
sealed="${SEALED_TESTS:-/sealed/tests}"
exec env -i PATH="$PATH" PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -I -B -m pytest -q -p no:cacheprovider \\
  -c /dev/null --rootdir /repo --confcutdir "$sealed" -o pythonpath=/repo --junitxml "${REPORT_DIR:-/tmp}/junit.xml" \\
  "$sealed"
"""


def _results(path):
    return {r["trajectory_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _forge_attempts(folder):
    folder.mkdir(parents=True)
    (folder / "report-rewrite.patch").write_text(make_patch(START_0417, {
        "invoicekit/_forge.py": REPORT_REWRITE, "invoicekit/__init__.py": INIT}))
    (folder / "exit-at-import.patch").write_text(make_patch(START_0417, {
        "invoicekit/_forge.py": EXIT_AT_IMPORT, "invoicekit/__init__.py": INIT}))


@needs_bwrap
def test_in_process_forges_are_failed_by_tasks_run_on_the_example(tmp_path):
    _forge_attempts(tmp_path / "attempts" / "task-0417")
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", EXAMPLE, "--attempts", tmp_path / "attempts", "--timeout", TIMEOUT,
                  "--output", out)
    assert done.returncode == 0, done.stderr
    results = _results(out)
    rewrite = results["task-0417/report-rewrite"]
    assert rewrite["status"] == "failed" and rewrite["score"] == 0.0, rewrite
    assert rewrite["fail_to_pass"] == {"passed": 0, "total": 2}
    assert "report disagrees with what the tests did" in rewrite["message"]
    exited = results["task-0417/exit-at-import"]
    assert exited["status"] == "failed" and exited["score"] == 0.0, exited
    assert {t["status"] for t in exited["tests"]} == {"missing"}
    assert "ended before pytest finished" in exited["message"]


@needs_bwrap
def test_an_honest_attempt_still_passes_through_the_channel(tmp_path):
    attempts = tmp_path / "attempts" / "task-0417"
    attempts.mkdir(parents=True)
    shutil.copy(EXAMPLE / "tasks" / "task-0417" / "solution.patch", attempts / "fixed.patch")
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", EXAMPLE, "--attempts", tmp_path / "attempts", "--timeout", TIMEOUT,
                  "--output", out)
    assert done.returncode == 0, done.stderr
    fixed = _results(out)["task-0417/fixed"]
    assert fixed["status"] == "passed" and fixed["score"] == 1.0 and fixed["message"] is None, fixed


def assert_validate_flags_a_bare_grader(tmp_path, *options):
    """`tasks validate` (with `options`) on task-0417 as shipped and task-0418 with a grader that runs pytest where
    the harness's plugin never loads: the first valid, the second invalid because the probe's forge fools it."""
    root = tmp_path / "delivery"
    for task in ("task-0417", "task-0418"):
        shutil.copytree(EXAMPLE / "tasks" / task, root / "tasks" / task)
    (root / "tasks" / "task-0418" / "grade.sh").write_text(BARE_GRADE)
    done = rubric("tasks", "validate", root, "--jobs", "2", *options, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = {t["task_id"]: t for t in json.loads((root / "validation.json").read_text())["tasks"]}
    assert verdicts["task-0417"]["verdict"] == "valid", verdicts["task-0417"]
    assert verdicts["task-0418"]["verdict"] == "invalid", verdicts["task-0418"]
    [reason] = verdicts["task-0418"]["reasons"]
    assert reason.startswith("grade.sh trusts a report the tested code can write") and "test_fail_to_pass_1" in reason


@needs_bwrap
def test_validate_flags_a_grader_an_in_process_forge_fools(tmp_path):
    assert_validate_flags_a_bare_grader(tmp_path, "--timeout", TIMEOUT)


# --- The channel itself, without the sandbox ----------------------------------------------------------------------

HIDDEN = """import pytest


def test_passes():
    assert True


def test_fails():
    assert False


@pytest.mark.xfail
def test_expected_to_fail():
    assert False


def test_skipped():
    pytest.skip("not here")


@pytest.fixture
def broken():
    raise RuntimeError("setup")


def test_setup_error(broken):
    pass
"""


def _pytest_under_channel(tmp_path, extra: str = ""):
    (tmp_path / "test_hidden.py").write_text(extra + HIDDEN)
    channel = ResultChannel()
    env = {**os.environ, **channel.environment(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, "-I", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                           "/dev/null", "--rootdir", str(tmp_path), str(tmp_path / "test_hidden.py")],
                          env=env, pass_fds=channel.fds, capture_output=True, text=True, timeout=120)
    return done, channel.collect()


def test_the_plugin_reports_what_each_test_did_under_python_isolated(tmp_path):
    done, log = _pytest_under_channel(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert log.problems == [] and log.unfinished == [] and len(log.started) == 1
    statuses = {node.rsplit("::", 1)[1]: status for node, status in log.tests.items()}
    assert statuses == {"test_passes": "passed", "test_fails": "failed", "test_expected_to_fail": "skipped",
                        "test_skipped": "skipped", "test_setup_error": "error"}


def test_a_report_rewritten_in_process_does_not_change_the_channel(tmp_path):
    done, log = _pytest_under_channel(tmp_path, REPORT_REWRITE + "\n\n")
    assert done.returncode == 0 and "4 passed, 1 xfailed" in done.stdout, done.stdout   # pytest was fooled
    statuses = {node.rsplit("::", 1)[1]: status for node, status in log.tests.items()}
    assert statuses["test_fails"] == "failed" and statuses["test_setup_error"] == "error"


def _signed(key: bytes, record: dict) -> bytes:
    payload = json.dumps(record).encode()
    return hmac.new(key, payload, hashlib.sha256).hexdigest().encode() + b" " + payload + b"\n"


def test_records_without_the_key_out_of_order_or_too_large_break_the_channel():
    key = b"k" * result_channel.KEY_BYTES
    start = {"run": "r", "seq": 0, "kind": "start"}
    passed = {"run": "r", "seq": 1, "kind": "test", "id": "t.py::t", "status": "passed"}
    end = {"run": "r", "seq": 2, "kind": "end", "exitstatus": 0}

    def read(*chunks):
        reader = result_channel._Reader(key)
        for chunk in chunks:
            reader.add(chunk)
        reader.close()
        return reader.log

    honest = read(_signed(key, start), _signed(key, passed), _signed(key, end))
    assert honest.problems == [] and honest.tests == {"t.py::t": "passed"} and channel_verdict(honest).broken is None
    forged = read(_signed(key, start), _signed(b"x" * 32, passed), _signed(key, end))
    assert forged.problems == ["a result channel record not signed with the run's key"] and forged.tests == {}
    assert channel_verdict(forged).broken.startswith("the result channel was tampered with")
    replayed = read(_signed(key, start), _signed(key, passed), _signed(key, passed))
    assert replayed.problems == ["a result channel record out of order (test #1)"]
    unfinished = read(_signed(key, start), _signed(key, passed))
    assert unfinished.unfinished == ["r"] and "ended before pytest finished" in channel_verdict(unfinished).broken
    assert read(b"x" * (result_channel.LINE_LIMIT + 1)).problems[0].startswith("a result channel line longer")
    assert read().used is False


def test_the_in_process_probe_is_appended_to_modules_only(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text('"""Doc."""\nfrom __future__ import annotations\nX = 1\n')
    (tmp_path / "tests" / "test_mod.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "conftest.py").write_text("")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text("Y = 2\n")
    (tmp_path / "pkg" / "link.py").symlink_to(outside)
    plant_in_process_forge(tmp_path)
    planted = (tmp_path / "pkg" / "mod.py").read_text()
    assert planted.startswith('"""Doc."""\nfrom __future__') and "_rubric_probe_forge()" in planted
    compile(planted, "mod.py", "exec")
    assert (tmp_path / "tests" / "test_mod.py").read_text() == "def test_x():\n    pass\n"
    assert (tmp_path / "conftest.py").read_text() == "" and outside.read_text() == "Y = 2\n"
