"""Reading an input file the user named (a rubric, a trajectory file, a dataset): regular files only, bounded.

`rubric grade r.yaml /dev/zero` would otherwise read without end (a MemoryError traceback), and a FIFO would
block the grader for ever waiting for a writer. So a file is looked at (stat) before it is opened, opened
non-blocking, looked at again through its descriptor (the path may have been swapped in between), and read only
when it is a regular file no larger than the limit; anything else is an InputFileError (an OSError, so the
loaders' existing handlers report it against that input alone) that says what the file is.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_INPUT_FILE_BYTES = 2 << 30   # a dataset or an Inspect log; larger ones are refused
# A trajectory file (.json, .jsonl, .traj): loading one peaks at about 3 times its size in memory with long tool
# outputs, 14 times as a long chat of short messages, up to 65 as nothing but minimal messages
# (docs/guide/trajectories.md), so 256 MiB bounds one file to a few GiB. An Inspect .eval zip has its own limits
# (adapters/inspect_log.py: 256 MiB a sample).
MAX_TRAJECTORY_FILE_BYTES = 256 << 20
MAX_JUDGE_FILE_BYTES = 16 << 20  # a calibration or verdict head file (a few KB); a larger one is refused unread
_CHUNK = 1 << 20


class InputFileError(OSError):
    """An input that is not a regular file, or too large; the message says which."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _in_units(size: int) -> str:
    """The limit in MiB or GiB, as ' (256 MiB)', for a whole number of MiB; else nothing."""
    if size <= 0 or size % (1 << 20):
        return ""
    return f" ({size >> 30} GiB)" if size % (1 << 30) == 0 else f" ({size >> 20} MiB)"


def _check(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = _kind(info.st_mode)
        raise InputFileError(f"{kind if kind.startswith('not') else 'it is ' + kind}: only regular files are read")
    if info.st_size > limit:
        raise InputFileError(f"it holds {info.st_size} bytes, more than the limit of {limit} bytes"
                             f"{_in_units(limit)}")


def check_input_file(path: str | os.PathLike, limit: int | None = None) -> None:
    """InputFileError unless path (its symlinks followed) is a regular file within the limit (default
    MAX_INPUT_FILE_BYTES); nothing opened."""
    _check(os.stat(path), MAX_INPUT_FILE_BYTES if limit is None else limit)


def read_input_file(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (default MAX_INPUT_FILE_BYTES); InputFileError for
    anything else (a device, a FIFO, a directory, a socket, a file too large, one that grows past the limit)."""
    limit = MAX_INPUT_FILE_BYTES if limit is None else limit
    _check(os.stat(path), limit)   # a FIFO or a device is never opened
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        _check(os.fstat(fd), limit)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise InputFileError(f"it grew past the limit of {limit} bytes{_in_units(limit)} while being read")
            chunks.append(chunk)
    finally:
        os.close(fd)


DATASET_HINT = "paths in a dataset resolve inside its folder; rubric grade --allow-outside PATH allows another folder"


def confined(base: Path, name: str, allowed: tuple[Path, ...] = (), *, what: str = "the dataset's folder",
             hint: str = DATASET_HINT) -> Path:
    """`name` (relative to `base`, or absolute), resolved with its symlinks followed; InputFileError when it lies
    outside `base` and outside every folder of `allowed` (those resolved too). what: what `base` is; hint: what to
    do instead; both for the message."""
    roots = [base.resolve(), *(Path(root).expanduser().resolve() for root in allowed)]
    path = (base / Path(name).expanduser()).resolve()
    if any(path == root or path.is_relative_to(root) for root in roots):
        return path
    raise InputFileError(f"{name!r} is outside {what} {roots[0]} ({hint})")


MAX_PATH_TEXT = 4096   # a string this long is content given inline, never the name of a file


def fits_a_path(text: str) -> bool:
    """Whether a string could be a file's name at all: on one line and shorter than MAX_PATH_TEXT."""
    return "\n" not in text and len(text) < MAX_PATH_TEXT


def looks_like_path(text: str, suffixes: tuple[str, ...] = (), *, yaml: bool = False) -> bool:
    """Whether a string given as an input (a rubric, a trajectory) names a file rather than holding the content
    itself: it fits a path and ends with one of `suffixes` (a file that may not exist: reading it says so) or
    names an existing regular file (a name the system refuses names none). yaml: YAML text is told apart too, a
    string holding ': ' or padded with whitespace being content, never a name."""
    if not text or not fits_a_path(text):
        return False
    if yaml and (": " in text or text.strip() != text):
        return False
    if suffixes and text.endswith(suffixes):
        return True
    try:
        return Path(text).is_file()
    except (OSError, ValueError):   # a name too long for the system, or one holding a NUL
        return False
