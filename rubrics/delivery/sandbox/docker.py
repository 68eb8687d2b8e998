"""The Docker runtime: the task's Dockerfile built into an image, grade.sh run in a container without network.

The workspace, hidden tests, task folder and report folder are mounted as in the bubblewrap runtime, and the
image's own files are read-only (`--read-only`; /tmp is a tmpfs), as bubblewrap's are; memory and process limits
are the container's (--memory, --pids-limit), and a container the kernel killed for its memory is read back as
such. At the end the container is removed with everything in it. Needs a reachable Docker daemon.

The container's first process is the harness's entry shell (docker_entry.py): it runs grade.sh as its child,
counts the processes grade.sh left, as bubblewrap's trampoline does, and says so on a named pipe in a folder of
the harness's mounted read-only, in a line that counts only with this run's proof (read from standard input
before grade.sh starts). The container's processes die with the shell.

grade.sh's pytest runs the harness's result-channel plugin here too (result_channel*.py): this `rubrics` package
is mounted read-only into the image's site-packages (found once per image by asking its `python`), the channel's
write end is a second named pipe in that folder, and the key copies follow the proof on standard input; the entry
shell hands both to descriptors 3 and 4, so the plugin gets them as under bubblewrap. An image without a Python
of at least 3.9 runs grade.sh without the plugin.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import rubrics
from rubrics.delivery.sandbox.base import GRADER, REPO, REPORT, SEALED_TESTS, TASK, SandboxOutcome, SandboxRequest, \
    SandboxUnavailable, environment
from rubrics.delivery.sandbox.docker_entry import CHANNEL_DIR, CHANNEL_FD, CHANNEL_FIFO, ENTRY, KEY_FD, STATUS_FIFO, \
    StatusPipe
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.process import run_bounded
from rubrics.delivery.sandbox.result_channel import ResultChannel

BUILD_TIMEOUT_S = 1800
PROBE_TIMEOUT_S = 120
# Where the image's python finds packages under `python -I`: the first site directory on its path.
SITE_PROBE = ("import sys\n"
              "assert sys.version_info >= (3, 9)\n"
              "print(next(p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))))")


class DockerSandbox:
    runtime = "docker"

    def __init__(self, docker: str | None = None) -> None:
        found = docker or shutil.which("docker")
        if found is None:
            raise SandboxUnavailable("docker not found: install Docker, or use --runtime bwrap")
        try:
            info = subprocess.run([found, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                                  timeout=20)
        except subprocess.TimeoutExpired:
            raise SandboxUnavailable("no Docker daemon answered within 20s; use --runtime bwrap") from None
        if info.returncode != 0:
            raise SandboxUnavailable(f"no Docker daemon reachable ({(info.stderr.strip() or 'docker info failed')[:200]}); "
                                     "use --runtime bwrap")
        self.docker = found
        # What is made once per task (its image) and once per image (where its python finds packages): --jobs
        # grades attempts of one task at once, and they wait for the one build; other tasks' go on meanwhile.
        self._made: dict[str, object] = {}
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def _once(self, key: str, make):
        """make() for `key` the first time it succeeds, under a lock of the key's own; its value from then on."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._made:
                self._made[key] = make()
            return self._made[key]

    def image_for(self, request: SandboxRequest) -> str:
        return self._once(f"image {request.task_id}", lambda: self._build(request))

    def _build(self, request: SandboxRequest) -> str:
        digest = hashlib.sha256((request.task_dir / "Dockerfile").read_bytes()).hexdigest()[:12]
        tag = f"rubric-task-{request.task_id.lower()}:{digest}"
        built = subprocess.run([self.docker, "build", "-q", "-t", tag, str(request.task_dir)], capture_output=True,
                               text=True, timeout=BUILD_TIMEOUT_S)
        if built.returncode != 0:
            raise SandboxUnavailable(f"{request.task_dir}/Dockerfile: build failed: {built.stderr.strip()[-300:]}")
        return tag

    def site_dir(self, image: str) -> str | None:
        """The image's site-packages for the plugin, or None where its python is missing or older than 3.9."""
        return self._once(f"site {image}", lambda: self._probe_site_dir(image))

    def _probe_site_dir(self, image: str) -> str | None:
        try:
            probe = subprocess.run([self.docker, "run", "--rm", "--network", "none", "--entrypoint", "python", image,
                                    "-I", "-c", SITE_PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except (subprocess.TimeoutExpired, OSError):
            return None
        found = probe.stdout.strip() if probe.returncode == 0 else ""
        return found if found.startswith("/") and "\n" not in found else None

    def run(self, request: SandboxRequest, limits: SandboxLimits) -> SandboxOutcome:
        try:
            image = self.image_for(request)
            site_dir = self.site_dir(image)
        except (SandboxUnavailable, subprocess.TimeoutExpired, OSError) as exc:
            return SandboxOutcome(None, False, 0.0, "", None, str(exc))
        with tempfile.TemporaryDirectory(prefix="rubric-channel-") as folder:
            try:
                return self._run_in(Path(folder), image, site_dir, request, limits)
            except OSError as exc:   # the harness's pipes or docker itself: not the attempt's doing
                return SandboxOutcome(None, False, 0.0, "", None, f"the Docker runtime failed: {exc}")

    def _run_in(self, folder: Path, image: str, site_dir: str | None, request: SandboxRequest,
                limits: SandboxLimits) -> SandboxOutcome:
        """One container, its status and result pipes in `folder` (mounted read-only at CHANNEL_DIR)."""
        os.chmod(folder, 0o711)   # the container's user may pass through to the pipes; nobody may list the folder
        name = f"rubric-grade-{uuid.uuid4().hex[:12]}"
        proof = secrets.token_hex(16)
        status = StatusPipe(folder / STATUS_FIFO, proof)
        channel = None
        try:
            channel = ResultChannel(folder / CHANNEL_FIFO) if site_dir is not None else None
            argv = docker_run_arguments(self.docker, image, name, request, limits, folder,
                                        None if channel is None else (site_dir, channel))
            outcome = run_bounded(lambda _fd: argv, limits.wall_s, limits.log_bytes,
                                  on_timeout=lambda: self._remove(name),
                                  stdin_data=f"{proof}\n".encode() + (b"" if channel is None else channel.keys))
            killed = self._oom_killed(name)
            self._remove(name)
        finally:
            left = status.collect()
            log = channel.collect() if channel is not None else None
        error = None
        if outcome.exit_code in (125, 126, 127) and left is None and not outcome.timed_out:
            # docker's own failures (125 the daemon, 126 and 127 the entry shell could not start): grade.sh never
            # ran, since the shell, which ran it, would have written its status line
            error = f"docker run failed with {outcome.exit_code}" + (
                " (no /bin/sh in the image for the harness's entry shell)" if outcome.exit_code == 127 else "")
        return SandboxOutcome(exit_code=None if error else outcome.exit_code, timed_out=outcome.timed_out,
                              wall_s=outcome.wall_s, log_tail=outcome.log_tail, left_processes=left,
                              sandbox_error=error, memory_killed=killed, summaries=tuple(outcome.summaries),
                              channel=log)

    def _oom_killed(self, name: str) -> bool:
        try:
            shown = subprocess.run([self.docker, "inspect", "--format", "{{.State.OOMKilled}}", name],
                                   capture_output=True, text=True, timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            return False
        return shown.stdout.strip() == "true"

    def _remove(self, name: str) -> None:
        """Best effort: a daemon too slow to answer leaves a stopped container behind, never an exception that
        would cost the batch its other results."""
        try:
            subprocess.run([self.docker, "rm", "-f", name], capture_output=True, timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            pass


def docker_run_arguments(docker: str, image: str, name: str, request: SandboxRequest, limits: SandboxLimits,
                         folder: Path, channel: tuple[str, ResultChannel] | None = None) -> list[str]:
    """`folder`: the harness's, holding the status pipe (and the channel's); `channel`: the image's site-packages
    and the result channel, where grade.sh's pytest gets the plugin."""
    argv = [docker, "run", "-i", "--name", name, "--network", "none", "--memory", f"{limits.memory_mb}m",
            "--memory-swap", f"{limits.memory_mb}m", "--pids-limit", str(limits.processes), "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--read-only", "--tmpfs", f"/tmp:rw,exec,size={limits.tmp_mb}m",
            "-v", f"{request.workspace}:{REPO}", "-v", f"{request.sealed_tests}:{SEALED_TESTS}:ro",
            "-v", f"{request.task_dir}:{TASK}:ro", "-v", f"{request.report_dir}:{REPORT}", "-w", REPO,
            "-v", f"{folder}:{CHANNEL_DIR}:ro"]
    if os.geteuid() != 0:
        # The container's root could not write to the caller's workspace and report folder (it holds no
        # capability to override their modes), and what it wrote would be root's on the host.
        argv += ["--user", f"{os.getuid()}:{os.getgid()}"]
    if (request.task_dir / "solution.patch").exists():
        argv += ["-v", f"/dev/null:{TASK}/solution.patch:ro"]
    variables = environment()
    if channel is not None:
        site_dir, results = channel
        argv += ["-v", f"{os.path.dirname(os.path.abspath(rubrics.__file__))}:{site_dir}/rubrics:ro"]
        variables.update(results.environment(channel_fd=CHANNEL_FD, key_fd=KEY_FD))
    for key, value in variables.items():
        argv += ["-e", f"{key}={value}"]
    return argv + ["--entrypoint", "/bin/sh", image, "-c", ENTRY, f"{TASK}/{GRADER}"]

