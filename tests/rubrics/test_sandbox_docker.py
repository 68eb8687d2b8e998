"""The Docker runtime end to end: the example tasks' Dockerfiles built, grade.sh run in a container, and the
harness's result channel carried into it (a named pipe and the container's standard input), so that the
in-process forges fail there as under bubblewrap. Real daemon, real image builds, real CLI; skipped, saying why,
where no daemon or no base image is here (.ci/run starts one and builds the image)."""
import json
import os
import shutil
import stat
import subprocess
import sys

from sandbox_support import EXAMPLE, needs_docker, rubric
from test_sandbox_result_channel import _forge_attempts, assert_validate_flags_a_bare_grader

from rubrics.delivery.sandbox.base import SandboxRequest
from rubrics.delivery.sandbox.docker import CHANNEL_FD, ENTRY, KEY_FD, docker_run_arguments
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.result_channel import CHANNEL_FD_VAR, KEY_FD_VAR, ResultChannel

TIMEOUT = "60"   # a first image build shares the time with the gradings beside it


def _results(path):
    return {r["trajectory_id"]: r for r in map(json.loads, path.read_text().splitlines())}


@needs_docker
def test_forges_fail_and_walls_hold_in_a_container(tmp_path):
    attempts = tmp_path / "attempts"
    _forge_attempts(attempts / "task-0417")
    shutil.copy(EXAMPLE / "tasks" / "task-0417" / "solution.patch", attempts / "task-0417" / "fixed.patch")
    for example in ("task-0419/attempt-02", "task-0504/attempt-01"):   # writes outside its workspace; 3 GB
        task, name = example.split("/")
        (attempts / task).mkdir(exist_ok=True)
        shutil.copy(EXAMPLE / "attempts" / task / f"{name}.patch", attempts / task / f"{name}.patch")
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", EXAMPLE, "--attempts", attempts, "--runtime", "docker", "--jobs", "2",
                  "--timeout", TIMEOUT, "--output", out, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    results = _results(out)
    assert {t: r["grader"]["runtime"] for t, r in results.items()} == dict.fromkeys(results, "docker")
    fixed = results["task-0417/fixed"]
    assert fixed["status"] == "passed" and fixed["score"] == 1.0 and fixed["message"] is None, fixed
    rewrite = results["task-0417/report-rewrite"]
    assert rewrite["status"] == "failed" and rewrite["score"] == 0.0, rewrite
    assert "report disagrees with what the tests did" in rewrite["message"]
    exited = results["task-0417/exit-at-import"]
    assert exited["status"] == "failed" and {t["status"] for t in exited["tests"]} == {"missing"}, exited
    assert "ended before pytest finished" in exited["message"]
    # The image's own files are read-only, as under bubblewrap: the attempt that passes only where it could
    # write outside its workspace fails.
    assert results["task-0419/attempt-02"]["status"] == "failed", results["task-0419/attempt-02"]
    memory = results["task-0504/attempt-01"]
    assert memory["status"] == "memory" and memory["score"] == 0.0, memory


@needs_docker
def test_validate_in_docker_flags_a_grader_an_in_process_forge_fools(tmp_path):
    assert_validate_flags_a_bare_grader(tmp_path, "--runtime", "docker", "--timeout", TIMEOUT)


# --- Without a daemon: the arguments and the channel over a named pipe ------------------------------------------

def test_the_container_gets_the_channel_the_plugin_and_a_read_only_root(tmp_path):
    request = SandboxRequest("t", tmp_path, tmp_path, tmp_path, tmp_path, 0)
    channel = ResultChannel(tmp_path / "results")
    try:
        argv = docker_run_arguments("docker", "img", "n", request, SandboxLimits(),
                                    (tmp_path, "/usr/lib/python3/dist-packages", channel))
    finally:
        channel.collect()
    assert "--read-only" in argv and "-i" in argv and "--rm" not in argv   # removed after its OOM flag is read
    assert f"{tmp_path}:/rubric-channel:ro" in argv
    assert any(v.endswith(":/usr/lib/python3/dist-packages/rubrics:ro") for v in argv)
    assert f"{CHANNEL_FD_VAR}={CHANNEL_FD}" in argv and f"{KEY_FD_VAR}={KEY_FD}" in argv
    assert argv[-5:] == ["/bin/sh", "img", "-c", ENTRY, "/task/grade.sh"]
    bare = docker_run_arguments("docker", "img", "n", request, SandboxLimits())
    assert "-i" not in bare and not any(CHANNEL_FD_VAR in v for v in bare)
    assert bare[-3:] == ["--entrypoint", "/task/grade.sh", "img"]


def test_a_channel_over_a_named_pipe_hears_a_writer_that_opens_it_by_path(tmp_path):
    """What the container does, without the container: open the pipe by its path, send signed records."""
    fifo = tmp_path / "results"
    channel = ResultChannel(fifo)
    assert stat.S_IMODE(os.stat(fifo).st_mode) == 0o222     # nobody can read another writer's records
    writer = (
        "import hashlib, hmac, json, os, sys\n"
        "key = sys.stdin.buffer.read(32)\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
        "for seq, kind, extra in ((0, 'start', {}), (1, 'test', {'id': 't::a', 'status': 'failed'}),\n"
        "                         (2, 'end', {'exitstatus': 1})):\n"
        "    payload = json.dumps({'run': 'r', 'seq': seq, 'kind': kind, **extra}).encode()\n"
        "    os.write(fd, hmac.new(key, payload, hashlib.sha256).hexdigest().encode() + b' ' + payload + b'\\n')\n")
    done = subprocess.run([sys.executable, "-c", writer, str(fifo)], input=channel.keys, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    log = channel.collect()
    assert log.started == ["r"] and log.ended == {"r": 1} and log.tests == {"t::a": "failed"} and not log.problems


def test_a_named_pipe_channel_with_no_writer_ends_empty(tmp_path):
    log = ResultChannel(tmp_path / "results").collect(wait_s=5)
    assert not log.used and not log.problems
