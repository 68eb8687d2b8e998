"""From paths to trajectories: the one way a path someone names becomes trajectories, for `rubric grade` and
`rubric view` (TRAJECTORY_OR_DIR, --trajectories), for score_many and its kin (a trajectory file among the inputs)
and for a dataset's trajectory field (whether a file it names holds a trajectory at all).

A file yields every trajectory it holds, in order (iter_trajectory_file: a .json one or an array of them, a .jsonl
one a line, an Inspect log or .eval zip its samples); a bad entry is a TrajectoryLoadError value naming its file
and line, so that the rest still load. Where the caller reads folders (the commands), a folder yields the
trajectories of its trajectory files (TRAJECTORY_FILE_SUFFIXES; not those of its subfolders), sorted by name, and a
folder without one, or a path that names nothing, is one TrajectoryLoadError naming the path as it was given.
Elsewhere (score_many) a path is read as a file whatever it names, and reading it says what is wrong with it.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rubrics import input_files
from rubrics.input_files import looks_like_path, read_input_file
from rubrics.trajectory.format import Trajectory, TrajectoryLoadError
from rubrics.trajectory.json_text import JSONTextError, decode_utf8, loads
from rubrics.trajectory.load import iter_trajectory_file

TRAJECTORY_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".eval", ".traj")
NO_TRAJECTORY_FILES = "no .json or .jsonl files (nor .eval, .traj) in this directory"
NO_SUCH_PATH = "no such file or directory"


def is_trajectory_file(src: Any) -> bool:
    """Whether score_many reads `src` as a file of trajectories (every entry) rather than as one trajectory: a Path,
    or a string naming an existing file with a trajectory-file suffix."""
    if isinstance(src, Path):
        return True
    return (isinstance(src, str) and src.endswith(TRAJECTORY_FILE_SUFFIXES) and "\n" not in src
            and looks_like_path(src))


def trajectory_files(folder: Path) -> list[Path]:
    """The trajectory files of a folder (not those of its subfolders), sorted."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in TRAJECTORY_FILE_SUFFIXES)


def iter_paths(paths: Iterable[str | Path], *, folders: bool = True) -> Iterator[Trajectory | TrajectoryLoadError]:
    """Every trajectory of each path, in order; what cannot be read is a TrajectoryLoadError value. folders: a
    folder contributes its trajectory files and a path must name something (the commands); without, every path is
    read as a file (score_many)."""
    for name in paths:
        path = Path(name)
        if not folders:
            yield from iter_trajectory_file(path)
            continue
        if path.is_dir():
            files = trajectory_files(path)
            if not files:
                yield TrajectoryLoadError(str(name), NO_TRAJECTORY_FILES)
        elif path.exists():
            files = [path]
        else:
            yield TrajectoryLoadError(str(name), NO_SUCH_PATH)
            files = []
        for file in files:
            yield from iter_trajectory_file(file)


def read_paths(paths: Iterable[str | Path]) -> tuple[list[Trajectory], list[str]]:
    """What `rubric grade` and `rubric view` read from their paths: (the trajectories in input order, one line
    "SOURCE: error: MESSAGE" per input or entry that did not load)."""
    loaded, errors = [], []
    for entry in iter_paths(paths):
        if isinstance(entry, TrajectoryLoadError):
            errors.append(f"{entry.source}: error: {entry.message}")
        else:
            loaded.append(entry)
    return loaded, errors


def expand_input(src: Any) -> Iterator:
    """One input of score_many as it goes to loading: a trajectory file's every entry (a bad one a
    TrajectoryLoadError value), in order; anything else (a dict, JSON text, a Trajectory) as it is."""
    if is_trajectory_file(src):
        yield from iter_paths([src], folders=False)
    else:
        yield src


def looks_like_trajectory_file(path: Path) -> bool:
    """Whether the file decodes as JSON that is a trajectory object, chat messages or a log an adapter reads; a
    file that does not decode at all gets the decoder's positioned message, which quotes nothing. (A dataset shows
    the loader's message for a file that does, and only the position and kind of its problems for any other.)"""
    from rubrics.trajectory.adapters import find_adapter   # loaded when asked for, as load.py loads them

    try:
        data = read_input_file(path, input_files.MAX_TRAJECTORY_FILE_BYTES)   # a larger one is not read again
        if data[:4] == b"PK\x03\x04":
            return True   # a zip: its reader's messages name members and positions
        decoded = loads(decode_utf8(data.removeprefix(b"\xef\xbb\xbf")))
    except (JSONTextError, OSError):   # positioned decode errors and read errors quote nothing of the content
        return True
    except Exception:  # noqa: BLE001
        return False
    if isinstance(decoded, dict):
        return "messages" in decoded or find_adapter(decoded) is not None
    return isinstance(decoded, list) and any(isinstance(m, dict) and "role" in m for m in decoded)
