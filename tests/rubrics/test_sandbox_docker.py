"""The Docker runtime end to end: the example tasks' Dockerfiles built, grade.sh run in a container, and the
harness's result channel carried into it (a named pipe and the container's standard input), so that the
in-process forges fail there as under bubblewrap. Real daemon, real image builds, real CLI; skipped, saying why,
where no daemon or no base image is here (.ci/run starts one and builds the image)."""
import os
import shutil
import stat
import subprocess
import sys

import pytest
from sandbox_support import EXAMPLE, needs_docker, rubric
from test_sandbox_result_channel import _forge_attempts, _results, assert_validate_flags_a_bare_grader

from rubrics.delivery.sandbox.base import SandboxRequest
from rubrics.delivery.sandbox.docker import docker_run_arguments
from rubrics.delivery.sandbox.docker_entry import CHANNEL_DIR, CHANNEL_FD, ENTRY, KEY_FD, StatusPipe
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.result_channel import CHANNEL_FD_VAR, KEY_FD_VAR, ResultChannel

TIMEOUT = "60"   # a first image build shares the time with the gradings beside it


@needs_docker
def test_forges_fail_and_walls_hold_in_a_container(tmp_path):
    attempts = tmp_path / "attempts"
    _forge_attempts(attempts / "task-0417")
    shutil.copy(EXAMPLE / "tasks" / "task-0417" / "solution.patch", attempts / "task-0417" / "fixed.patch")
    # writes outside its workspace; allocates 3 GB; the right fix, leaving a process running
    for example in ("task-0419/attempt-02", "task-0504/attempt-01", "task-0421/attempt-03"):
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
    left = results["task-0421/attempt-03"]
    assert left["status"] == "left-processes" and left["left_processes"] == 1 and left["score"] == 0.0, left
    assert all(r["left_processes"] == 0 for t, r in results.items() if t != "task-0421/attempt-03"
               and r["status"] != "memory"), results


@needs_docker
def test_validate_in_docker_flags_a_grader_an_in_process_forge_fools(tmp_path):
    assert_validate_flags_a_bare_grader(tmp_path, "--runtime", "docker", "--timeout", TIMEOUT)


# --- Without a daemon: the arguments and the channel over a named pipe ------------------------------------------

def test_the_container_gets_the_channel_the_plugin_and_a_read_only_root(tmp_path):
    request = SandboxRequest("t", tmp_path, tmp_path, tmp_path, tmp_path, 0)
    channel = ResultChannel(tmp_path / "results")
    try:
        argv = docker_run_arguments("docker", "img", "n", request, SandboxLimits(), tmp_path,
                                    ("/usr/lib/python3/dist-packages", channel))
    finally:
        channel.collect()
    assert "--read-only" in argv and "-i" in argv and "--rm" not in argv   # removed after its OOM flag is read
    assert f"{tmp_path}:/rubric-channel:ro" in argv
    assert any(v.endswith(":/usr/lib/python3/dist-packages/rubrics:ro") for v in argv)
    assert f"{CHANNEL_FD_VAR}={CHANNEL_FD}" in argv and f"{KEY_FD_VAR}={KEY_FD}" in argv
    assert argv[-5:] == ["/bin/sh", "img", "-c", ENTRY, "/task/grade.sh"]
    bare = docker_run_arguments("docker", "img", "n", request, SandboxLimits(), tmp_path)
    assert not any(CHANNEL_FD_VAR in v or v.endswith("/rubrics:ro") for v in bare)
    assert bare[-5:] == argv[-5:]   # the entry shell counts leftover processes with or without a channel


def test_a_caller_other_than_root_runs_the_container_as_itself(tmp_path, monkeypatch):
    """Run by a user of the docker group, grade.sh ran as the container's root, which may not write to that user's
    report folder (pytest failed writing its JUnit file, so every attempt failed) and leaves root's files in the
    workspace."""
    request = SandboxRequest("t", tmp_path, tmp_path, tmp_path, tmp_path, 0)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    monkeypatch.setattr(os, "getgid", lambda: 1001)
    argv = docker_run_arguments("docker", "img", "n", request, SandboxLimits(), tmp_path)
    assert argv[argv.index("--user") + 1] == "1000:1001"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "--user" not in docker_run_arguments("docker", "img", "n", request, SandboxLimits(), tmp_path)


def _own_pid_namespace() -> str | None:
    try:
        probe = subprocess.run(["unshare", "-Urpf", "--mount-proc", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare cannot run here: {exc}"
    return None if probe.returncode == 0 else f"unshare cannot make a pid namespace here: {probe.stderr[:200]!r}"


@pytest.mark.skipif(_own_pid_namespace() is not None, reason=_own_pid_namespace() or "")
def test_the_entry_shell_counts_what_grade_sh_left_and_proves_its_line(tmp_path):
    """ENTRY itself, in this machine's sh and a pid namespace of its own as in a container: a grader that leaves
    a process running gets it counted, the line carries the proof read first from standard input, and a line the
    grader wrote to the status pipe without the proof is passed over."""
    folder = tmp_path / "harness"
    folder.mkdir()
    grader = tmp_path / "grade.sh"
    grader.write_text(f"#!/bin/sh\necho 'forged 0 0' > {folder / 'status'}\nsleep 30 &\nexit 3\n")
    grader.chmod(0o755)
    status = StatusPipe(folder / "status", "p" * 32)
    try:
        done = subprocess.run(["unshare", "-Urpf", "--mount-proc", "sh", "-c", ENTRY.replace(CHANNEL_DIR, str(folder)),
                               str(grader)], input=b"p" * 32 + b"\n", capture_output=True, timeout=60)
    finally:
        left = status.collect()
    assert done.returncode == 3, done.stderr
    assert left == 1          # the sleep; the namespace's end killed it


def test_the_status_pipe_keeps_only_the_proven_line_within_its_limit(tmp_path):
    status = StatusPipe(tmp_path / "status", "a" * 32)
    fd = os.open(tmp_path / "status", os.O_WRONLY)
    os.write(fd, b"x" * 100_000 + b"\n" + b"b" * 32 + b" 0 0\n" + b"a" * 32 + b" 0 7\n" + b"a" * 32 + b" 0 0\n")
    os.close(fd)
    assert status.collect() == 7


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


def test_attempts_of_one_task_at_once_build_its_image_once(tmp_path):
    """Two slots grading the same task together wait for one build (a docker CLI that logs what it is asked)."""
    import threading

    from rubrics.delivery.sandbox.docker import DockerSandbox

    log = tmp_path / "calls"
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\necho \"$1\" >> {log}\n[ \"$1\" = build ] && sleep 0.5\necho sha256:x\n")
    fake.chmod(0o755)
    sandbox = DockerSandbox(docker=str(fake))
    task = tmp_path / "task-1"
    task.mkdir()
    (task / "Dockerfile").write_text("FROM scratch\n")
    request = SandboxRequest("task-1", task, tmp_path, tmp_path, tmp_path, 0)
    tags = []
    threads = [threading.Thread(target=lambda: tags.append(sandbox.image_for(request))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert log.read_text().split().count("build") == 1 and len(set(tags)) == 1 and len(tags) == 2


@needs_docker
def test_an_image_without_a_shell_is_a_sandbox_error_not_a_failed_attempt(tmp_path):
    """grade.sh never ran: docker's exit status 127 is the harness's failure, not the attempt's."""
    delivery = tmp_path / "delivery"
    shutil.copytree(EXAMPLE / "tasks" / "task-0417", delivery / "tasks" / "task-0417")
    (delivery / "tasks" / "task-0417" / "Dockerfile").write_text("FROM scratch\nCOPY repo/ /repo\n")
    attempts = tmp_path / "attempts" / "task-0417"
    attempts.mkdir(parents=True)
    shutil.copy(EXAMPLE / "tasks" / "task-0417" / "solution.patch", attempts / "fixed.patch")
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", delivery, "--attempts", tmp_path / "attempts", "--runtime", "docker",
                  "--timeout", TIMEOUT, "--output", out, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    [result] = _results(out).values()
    assert result["status"] == "sandbox-error" and "no /bin/sh in the image" in result["message"], result
