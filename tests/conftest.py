"""Every test starts with its own, empty verdict cache: a verdict cached by one test (or by a user's earlier
`rubric grade`) must never answer for another test's judge, e.g. one that injects engine faults.

Tests that start the engine directly (LLM(), resolve_model_path(None)) use the product's model cache too, so the
embedded model is fetched and converted once per machine, not once per cache."""
from __future__ import annotations

import os

import pytest

from rubrics.model_cache import rubrics_cache_dir

os.environ.setdefault("JUDGE_ENGINE_CACHE", str(rubrics_cache_dir()))


@pytest.fixture(autouse=True)
def isolated_verdict_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICS_VERDICT_CACHE", str(tmp_path / "verdicts.sqlite"))
