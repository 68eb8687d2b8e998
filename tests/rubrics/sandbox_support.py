"""Shared by the sandbox tests: run the CLI, and skip (saying why) where bubblewrap cannot run."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "delivery"
TIMEOUT = "8"     # the time-overrun attempt costs this much; every honest grading takes under a second


def rubric(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def _bwrap_works() -> str | None:
    if shutil.which("bwrap") is None:
        return "bwrap not installed (apt-get install bubblewrap); CI installs it in .ci/run"
    probe = subprocess.run(["bwrap", "--unshare-net", "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bwrap cannot make namespaces here: {probe.stderr.strip()[:200]}"
    return None


BWRAP_MISSING = _bwrap_works()
needs_bwrap = pytest.mark.skipif(BWRAP_MISSING is not None, reason=BWRAP_MISSING or "")

# The example tasks' Dockerfiles start FROM this image; CI, which reaches no image registry, builds a local one.
DOCKER_BASE = "python:3.11-slim"


def _docker_works() -> str | None:
    if shutil.which("docker") is None:
        return "docker not installed; .ci/run installs it and starts a daemon"
    try:
        probe = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", DOCKER_BASE],
                               capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "no Docker daemon answered within 30s"
    if probe.returncode != 0:
        return (f"no Docker daemon, or no {DOCKER_BASE} image, here ({probe.stderr.strip()[:160]}); "
                ".ci/run starts a daemon and builds the image with .ci/docker-base-image")
    return None


DOCKER_MISSING = _docker_works()
needs_docker = pytest.mark.skipif(DOCKER_MISSING is not None, reason=DOCKER_MISSING or "")
