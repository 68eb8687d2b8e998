"""`rubric tasks run` on the example attempts, with the real sandbox: statuses, walls, the hidden-test guard."""
import hashlib
import json
import os
import socket
import threading

import pytest
from sandbox_support import EXAMPLE, TIMEOUT, needs_bwrap, rubric

pytestmark = needs_bwrap

# What each example attempt is, and the status it must get (examples/delivery/attempts/README.md).
EXPECTED = {
    "task-0417/attempt-01": "passed", "task-0417/attempt-02": "failed", "task-0417/attempt-03": "failed",
    "task-0417/attempt-04": "failed",                                          # plants passing tests
    "task-0418/attempt-01": "passed", "task-0418/attempt-02": "passed", "task-0418/attempt-03": "passed",
    "task-0419/attempt-01": "failed", "task-0419/attempt-02": "failed",       # writes outside its workspace
    "task-0419/attempt-03": "failed",
    "task-0420/attempt-01": "failed",                                          # reads another attempt's workspace
    "task-0420/attempt-02": "passed", "task-0420/attempt-03": "failed",
    "task-0421/attempt-01": "failed",                                          # reaches for the network
    "task-0421/attempt-02": "passed",
    "task-0421/attempt-03": "left-processes",                                  # right fix, leaves a process
    "task-0421/attempt-04": "passed",
    "task-0501/attempt-01": "process-limit",                                   # fork bomb
    "task-0501/attempt-02": "passed", "task-0501/attempt-03": "failed",
    "task-0502/attempt-01": "timeout", "task-0502/attempt-02": "passed", "task-0502/attempt-03": "failed",
    "task-0503/attempt-01": "passed", "task-0503/attempt-02": "passed", "task-0503/attempt-03": "passed",
    "task-0504/attempt-01": "memory", "task-0504/attempt-02": "passed",
    "task-0504/attempt-03": "failed",                                          # os._exit(0) before any test
    "task-0505/attempt-01": "passed", "task-0505/attempt-02": "failed",
    "task-0601/attempt-01": "passed", "task-0601/attempt-02": "failed",
    "task-0601/attempt-03": "failed",                                          # conftest.py forcing passes
    "task-0601/attempt-04": "failed",
    "task-0602/attempt-01": "passed", "task-0602/attempt-02": "failed",
    "task-0602/attempt-03": "passed",                                          # right fix, deletes a test
    "task-0603/attempt-01": "passed", "task-0603/attempt-02": "passed", "task-0603/attempt-03": "passed",
    "task-0604/attempt-01": "passed", "task-0604/attempt-02": "failed", "task-0604/attempt-03": "failed",
}
HOST_ESCAPES = ("/tmp/rubric-wall-escape", "/rubric-wall-escape", "/work/rubric-wall-escape",
                "/root/rubric-wall-escape", "/usr/lib/rubric-wall-escape")
DETERMINISTIC = ("trajectory_id", "task_id", "attempt", "attempt_kind", "status", "score", "complete", "exit_code",
                 "fail_to_pass", "pass_to_pass", "tests", "touched_tests", "grader")


def _stable(line):
    """The fields a rerun must reproduce. How many processes a fork bomb had made when the sandbox killed them
    races the kill (255 one run, 256 the next), so only whether any were left is compared."""
    return {**{k: line[k] for k in DETERMINISTIC}, "left_any_processes": bool(line["left_processes"])}


def _digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # The network attempt succeeds if it can reach this listener on the host's loopback.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", 47113))
        listener.listen()
        threading.Thread(target=lambda: [listener.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()
    except OSError:
        pass    # something on the host holds the port already: as reachable from outside the sandbox
    tasks_before = _digest(EXAMPLE / "tasks")
    out = tmp_path_factory.mktemp("run") / "results.jsonl"
    try:
        done = rubric("tasks", "run", EXAMPLE, "--attempts", EXAMPLE / "attempts", "--jobs", "2",
                      "--timeout", TIMEOUT, "--output", out)
    finally:
        listener.close()
    results = {r["trajectory_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    return done, results, tasks_before


def test_every_attempt_gets_its_status(run):
    done, results, _ = run
    assert done.returncode == 0, done.stderr
    assert {t: r["status"] for t, r in results.items()} == EXPECTED
    assert all(r["complete"] for r in results.values())


def test_scores_partial_credit_and_failures(run):
    _, results, _ = run
    assert results["task-0417/attempt-01"]["score"] == 1.0
    assert results["task-0417/attempt-03"]["score"] == 0.75          # one of two fail-to-pass tests fixed
    assert results["task-0501/attempt-03"]["fail_to_pass"] == {"passed": 1, "total": 1}
    assert results["task-0501/attempt-03"]["pass_to_pass"] == {"passed": 0, "total": 1}
    for hostile in ("task-0421/attempt-03", "task-0502/attempt-01", "task-0504/attempt-03"):
        assert results[hostile]["score"] == 0.0, hostile
    early = results["task-0504/attempt-03"]
    assert early["exit_code"] == 0 and {t["status"] for t in early["tests"]} == {"missing"}


def test_hidden_tests_are_restored_and_tampering_is_noted(run):
    _, results, tasks_before = run
    planted = results["task-0417/attempt-04"]
    assert planted["touched_tests"] == ["tests/test_fail_to_pass.py"]
    assert planted["fail_to_pass"] == {"passed": 0, "total": 2}       # graded against the originals
    deleted = results["task-0602/attempt-03"]
    assert deleted["touched_tests"] == ["tests/test_pass_to_pass.py"] and deleted["pass_to_pass"]["total"] == 1
    assert results["task-0601/attempt-03"]["fail_to_pass"]["passed"] == 0   # its conftest.py was not loaded
    assert all(not r["touched_tests"] for t, r in results.items() if t not in ("task-0417/attempt-04",
                                                                              "task-0602/attempt-03"))
    assert _digest(EXAMPLE / "tasks") == tasks_before    # grade.sh and the sealed tests survived the write attempt


def test_walls_hold_and_nothing_is_left_behind(run):
    _, results, _ = run
    assert not [p for p in HOST_ESCAPES if os.path.exists(p)]
    assert results["task-0421/attempt-03"]["left_processes"] >= 1
    me = str(os.getpid())
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"rubric-wall-leftover" in cmdline and pid != me:
            survivors.append(pid)
    assert survivors == []
    # The attempt graded after each hostile one on its task passes: the sandbox left nothing behind.
    for after in ("task-0420/attempt-02", "task-0421/attempt-02", "task-0421/attempt-04", "task-0501/attempt-02",
                  "task-0502/attempt-02", "task-0504/attempt-02"):
        assert results[after]["status"] == "passed", after


def test_committed_example_results_come_from_this_command(run):
    _, results, _ = run
    committed = [json.loads(line) for line in (EXAMPLE / "results.jsonl").read_text().splitlines()]
    assert [c["trajectory_id"] for c in committed] == sorted(EXPECTED)
    for line in committed:
        fresh = results[line["trajectory_id"]]
        assert _stable(line) == _stable(fresh), line["trajectory_id"]


def test_committed_candidate_results_come_from_this_command(tmp_path):
    out = tmp_path / "candidate.jsonl"
    done = rubric("tasks", "run", EXAMPLE, "--attempts", EXAMPLE / "candidate-attempts", "--jobs", "2",
                  "--timeout", TIMEOUT, "--output", out)
    assert done.returncode == 0, done.stderr
    fresh = [json.loads(line) for line in out.read_text().splitlines()]
    committed = [json.loads(line) for line in (EXAMPLE / "candidate-results.jsonl").read_text().splitlines()]
    assert [_stable(r) for r in fresh] == [_stable(r) for r in committed]
