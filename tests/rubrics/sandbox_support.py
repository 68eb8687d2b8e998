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
