"""The engine's own cache directory (the embedded model, GGUF conversions, file digests) and a lock on it.

An application that embeds the engine passes its own directory (EngineConfig.cache_dir, or the cache_dir
argument of the weights and conversion functions); otherwise $JUDGE_ENGINE_CACHE, else ~/.cache/judge_engine.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CACHE_ENV = "JUDGE_ENGINE_CACHE"


def engine_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir`` when given, else ``$JUDGE_ENGINE_CACHE``, else ``~/.cache/judge_engine``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "judge_engine"


@contextmanager
def cache_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` across processes, so a download or conversion is done only once."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: atomic renames still keep the cache consistent, work may be duplicated
        yield
        return
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def staged_file(path: Path, prefix: str) -> Iterator[Path]:
    """A file written beside ``path`` and renamed into place (readable by all, as a shared cache is) when the block
    ends without an exception; otherwise removed, so a half-written file is never read under ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=prefix, suffix=path.suffix, dir=path.parent)
    os.close(handle)
    try:
        yield Path(staging)
        os.chmod(staging, 0o644)   # mkstemp makes it private
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
