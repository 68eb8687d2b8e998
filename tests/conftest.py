"""Every test starts with its own, empty verdict cache: a verdict cached by one test (or by a user's earlier
`rubric grade`) must never answer for another test's judge, e.g. one that injects engine faults.

Tests that start the engine directly (LLM(), resolve_model_path(None)) use the product's model cache too, so the
embedded model is fetched and converted once per machine, not once per cache.

The judge of the tests is SmolLM2-135M-Instruct, unless a test names another: most tests are about the pipeline,
not about verdict quality, and the default judge model (several GB in float32) is exercised end to end by the
tests that unset RUBRICS_JUDGE_MODEL (tests/test_default_judge.py)."""
from __future__ import annotations

import os

import pytest

from rubrics.cache_dir import rubrics_cache_dir

os.environ.setdefault("JUDGE_ENGINE_CACHE", str(rubrics_cache_dir()))
os.environ.setdefault("RUBRICS_JUDGE_MODEL", "smollm2-135m-instruct")
# A calibration or head shipped with the package that its judge refuses (a method's prompts changed since it was
# fitted) fails the test that builds the judge, instead of the judge running uncalibrated with a warning
# (rubrics/judges/fitted/fitted_file.py); CLI subprocesses inherit it.
os.environ.setdefault("RUBRICS_STRICT_FITTED_FILES", "1")

try:   # no property test is timed: on a loaded machine hypothesis' 200 ms deadline fails tests that are right
    from hypothesis import settings

    settings.register_profile("untimed", deadline=None)
    settings.load_profile("untimed")
except ImportError:
    pass


@pytest.fixture(autouse=True)
def isolated_verdict_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICS_VERDICT_CACHE", str(tmp_path / "verdicts.sqlite"))
