"""Every test starts with its own, empty verdict cache: a verdict cached by one test (or by a user's earlier
`rubric grade`) must never answer for another test's judge, e.g. one that injects engine faults.

Tests that start the engine directly (LLM(), resolve_model_path(None)) use the product's model cache too, so the
embedded model is fetched and converted once per machine, not once per cache.

The judge of the tests is SmolLM2-135M-Instruct, unless a test names another: most tests are about the pipeline,
not about verdict quality, and the default judge model (several GB in float32) is exercised end to end by the
tests that unset RUBRICS_JUDGE_MODEL (tests/test_default_judge.py)."""
from __future__ import annotations

import os
import sys

import pytest

from rubrics.cache_dir import rubrics_cache_dir

os.environ.setdefault("JUDGE_ENGINE_CACHE", str(rubrics_cache_dir()))
os.environ.setdefault("RUBRICS_JUDGE_MODEL", "smollm2-135m-instruct")
# A calibration or head shipped with the package that its judge refuses (a method's prompts changed since it was
# fitted) fails the test that builds the judge, instead of the judge running uncalibrated with a warning
# (rubrics/judges/fitted/fitted_file.py); CLI subprocesses inherit it.
os.environ.setdefault("RUBRICS_STRICT_FITTED_FILES", "1")
# Under pytest-xdist each worker is a process of its own: the cores are shared out between the workers (and the
# CLI subprocesses they start inherit it), so that two workers on two cores do not each run two torch threads
# and stall each other.
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, str(max(1, _CORES // _WORKERS)))
    if "torch" in sys.modules:   # a plugin imported it before the variables were set
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

try:   # no property test is timed: on a loaded machine hypothesis' 200 ms deadline fails tests that are right
    from hypothesis import settings

    settings.register_profile("untimed", deadline=None)
    settings.load_profile("untimed")
except ImportError:
    pass


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the addopts): one worker per core, at most 4, because each worker loads its own models (a few
    GiB at most) and the suite's heaviest files, not the number of workers, set its wall time past that."""
    return max(1, min(4, _CORES))


@pytest.fixture(autouse=True)
def isolated_verdict_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICS_VERDICT_CACHE", str(tmp_path / "verdicts.sqlite"))
