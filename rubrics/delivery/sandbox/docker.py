"""The Docker runtime: the task's Dockerfile built into an image, grade.sh run in a container without network.

The workspace, hidden tests, task folder and report folder are mounted as in the bubblewrap runtime;
memory and process limits are the container's (--memory, --pids-limit); at the end the container is
removed with everything in it. Needs a reachable Docker daemon.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import uuid

from rubrics.delivery.sandbox.base import GRADER, REPO, REPORT, SEALED_TESTS, TASK, SandboxOutcome, SandboxRequest, \
    SandboxUnavailable, environment
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.process import run_bounded

BUILD_TIMEOUT_S = 1800


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
        self._images: dict[str, str] = {}

    def image_for(self, request: SandboxRequest) -> str:
        if request.task_id not in self._images:
            digest = hashlib.sha256((request.task_dir / "Dockerfile").read_bytes()).hexdigest()[:12]
            tag = f"rubric-task-{request.task_id.lower()}:{digest}"
            built = subprocess.run([self.docker, "build", "-q", "-t", tag, str(request.task_dir)], capture_output=True,
                                   text=True, timeout=BUILD_TIMEOUT_S)
            if built.returncode != 0:
                raise SandboxUnavailable(f"{request.task_dir}/Dockerfile: build failed: {built.stderr.strip()[-300:]}")
            self._images[request.task_id] = tag
        return self._images[request.task_id]

    def run(self, request: SandboxRequest, limits: SandboxLimits) -> SandboxOutcome:
        try:
            image = self.image_for(request)
        except (SandboxUnavailable, subprocess.TimeoutExpired, OSError) as exc:
            return SandboxOutcome(None, False, 0.0, "", None, str(exc))
        name = f"rubric-grade-{uuid.uuid4().hex[:12]}"
        argv = docker_run_arguments(self.docker, image, name, request, limits)
        outcome = run_bounded(lambda _fd: argv, limits.wall_s, limits.log_bytes,
                              on_timeout=lambda: self._remove(name))
        self._remove(name)
        error = None
        if outcome.exit_code is not None and outcome.exit_code in (125, 126) and not outcome.timed_out:
            error = f"docker run failed with {outcome.exit_code}"
        return SandboxOutcome(exit_code=None if error else outcome.exit_code, timed_out=outcome.timed_out,
                              wall_s=outcome.wall_s, log_tail=outcome.log_tail, left_processes=None,
                              sandbox_error=error, summaries=tuple(outcome.summaries))

    def _remove(self, name: str) -> None:
        subprocess.run([self.docker, "rm", "-f", name], capture_output=True, timeout=60)


def docker_run_arguments(docker: str, image: str, name: str, request: SandboxRequest,
                         limits: SandboxLimits) -> list[str]:
    argv = [docker, "run", "--rm", "--name", name, "--network", "none", "--memory", f"{limits.memory_mb}m",
            "--memory-swap", f"{limits.memory_mb}m", "--pids-limit", str(limits.processes), "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--tmpfs", f"/tmp:rw,exec,size={limits.tmp_mb}m",
            "-v", f"{request.workspace}:{REPO}", "-v", f"{request.sealed_tests}:{SEALED_TESTS}:ro",
            "-v", f"{request.task_dir}:{TASK}:ro", "-v", f"{request.report_dir}:{REPORT}", "-w", REPO]
    if (request.task_dir / "solution.patch").exists():
        argv += ["-v", f"/dev/null:{TASK}/solution.patch:ro"]
    for key, value in environment().items():
        argv += ["-e", f"{key}={value}"]
    return argv + [image, f"{TASK}/{GRADER}"]
