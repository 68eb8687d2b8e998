"""Loading trajectories: the accepted input shapes, from a file, a dict, a list or a string.

A .json file holds one trajectory or an array of them; a .jsonl file holds one a line; a bare list of OpenAI chat
messages is one trajectory; Inspect, OpenAI Responses, Anthropic Messages and SWE-agent shapes go through their
adapters. Loading never lets a pydantic, JSON or decoding error escape: a broken trajectory becomes a
`TrajectoryError` whose message names the file, the line (and column, where there is one) and the field.
Which paths are read, and how a folder is, is paths.py's.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubrics.input_files import looks_like_path
from rubrics.trajectory.json_text import JSONTextError, TextLine, decode_utf8, text_lines, top_level_array_spans
from rubrics.trajectory.json_text import loads as _loads_json
from rubrics.trajectory.format import Message, Trajectory, TrajectoryError, TrajectoryLoadError


class _Problem(Exception):
    """A load failure before its source is known; callers add "file:line"."""

    def __init__(self, message: str, line_offset: int = 0, loc: tuple = ()):
        super().__init__(message)
        self.message = message
        self.line_offset = line_offset
        self.loc = loc  # field path of the first validation error, to find its line in the text


def _format_validation_error(error: ValidationError, limit: int = 3) -> str:
    problems = error.errors()
    parts = [f"field {'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in problems[:limit]]
    if len(problems) > limit:
        parts.append(f"and {len(problems) - limit} more")
    return "; ".join(parts)


def _default_id(data: Any) -> str:
    try:
        canonical = json.dumps(data, sort_keys=True, default=str)
    except RecursionError:   # a dict built in Python can be nested past what the encoder can walk
        raise _Problem("nested too deeply to derive an id from the content; give it an 'id'") from None
    digest = hashlib.sha1(canonical.encode()).hexdigest()
    return f"trajectory-{digest[:10]}"


def _is_message_list(data: list) -> bool:
    # One message without a role is a field error in a message list, not a different kind of document.
    return all(isinstance(m, dict) for m in data) and any("role" in m for m in data)


def _adapted(data: Any) -> list[Any] | None:
    """The trajectories of data in another framework's shape (rubrics/adapters), or None for our own shape."""
    from rubrics.trajectory.adapters import AdapterError, find_adapter

    adapter = find_adapter(data)
    if adapter is None:
        return None
    try:
        return adapter.convert(data)
    except AdapterError as error:
        raise _Problem(f"{adapter.name}: {error}") from None
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as error:   # a shape it did not plan for
        raise _Problem(f"{adapter.name}: cannot convert: {type(error).__name__}: {error}") from None


def _validate(data: Any, default_id: str | None) -> Trajectory:
    adapted = _adapted(data)
    if adapted is not None:
        if len(adapted) != 1:
            raise _Problem(f"holds {len(adapted)} trajectories; iter_trajectory_file() or score_many read them all")
        data = adapted[0]
    if isinstance(data, list):
        if not _is_message_list(data):
            raise _Problem("expected a trajectory object or a list of chat messages that each have a 'role'")
        data = {"messages": data}
    if not isinstance(data, dict):
        raise _Problem(f"expected a JSON object, got {type(data).__name__}")
    # a dict of our own (the caller's is never changed); the parsed one, if it was the last reference, is freed
    data = {**data, "id": default_id or _default_id(data)} if data.get("id") is None else dict(data)
    try:
        _validate_messages_in_place(data)
        return Trajectory.model_validate(data)
    except ValidationError as error:
        raise _Problem(_format_validation_error(error), loc=tuple(error.errors()[0]["loc"])) from None
    except (TypeError, ValueError, RecursionError) as error:  # a shape no validator planned for
        raise _Problem(f"{type(error).__name__}: {error}") from None


def _validate_messages_in_place(data: dict) -> None:
    """Each parsed message replaced by its Message as soon as it is validated, so that a long chat is not held
    twice (as parsed JSON and as models) at the peak of loading it. A message that does not validate is left as it
    is, with the ones after it: the trajectory's own validation then reports it with its full location."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return
    _check_parts(messages)
    messages = data["messages"] = list(messages)   # our own list: a caller's list of messages is never changed
    for index, raw in enumerate(messages):
        if not isinstance(raw, dict):
            return
        try:
            messages[index] = Message.model_validate(raw)
        except ValidationError:
            return


# Messages and tool calls one trajectory may hold. Each becomes an object of about 270 bytes whatever its text, so
# a file of nothing but minimal messages costs about 20 times its size as models; counted on the parsed JSON,
# before any model is built (docs/guide/trajectories.md).
MAX_MESSAGES_AND_CALLS = 1_000_000


def _check_parts(messages: list) -> None:
    calls = sum(len(m["tool_calls"]) for m in messages
                if isinstance(m, dict) and isinstance(m.get("tool_calls"), list))
    if len(messages) + calls > MAX_MESSAGES_AND_CALLS:
        raise _Problem(f"holds {len(messages)} messages and {calls} tool calls, more than the "
                       f"{MAX_MESSAGES_AND_CALLS} a trajectory may hold in all", loc=("messages",))


def _decode(text: str) -> Any:
    try:
        return _loads_json(text)
    except JSONTextError as error:
        raise _Problem(str(error), error.line - 1) from None


def _load_one(text: str | bytes, path: str, line: int, default_id: str | None) -> Trajectory:
    """Decodes and validates one entry; failures become TrajectoryLoadError("path:line", message). text: the entry's
    JSON text, or the UTF-8 bytes of a whole file: their text is then held only while it is decoded, not beside
    the models being built (a document with one character past Latin-1 takes 2 or 4 bytes a character as text),
    and decoded again only to place an error."""
    try:
        # The decoded value is passed, never named here: _validate's copy is then its only holder, and each raw
        # message is freed as soon as its Message is built (_validate_messages_in_place).
        trajectory = _validate(_decode(_as_text(text)), default_id)
    except _Problem as problem:
        offset = problem.line_offset or _line_offset_of(_as_text(text), problem.loc)
        raise TrajectoryLoadError(f"{path}:{line + offset}", problem.message) from None
    trajectory.source = f"{path}:{line}"
    return trajectory


def _as_text(text: str | bytes) -> str:
    return text if isinstance(text, str) else text.decode("utf-8")


def _skip_blanks(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _line_offset_of(text: str, loc: tuple) -> int:
    """Lines from the start of `text` to the JSON value at `loc` (or the deepest container of it that exists)."""
    decoder, position = json.JSONDecoder(), _skip_blanks(text, 0)
    if text[position : position + 1] == "[" and loc[:1] == ("messages",):
        loc = loc[1:]  # a bare message list was wrapped as {"messages": [...]} before validation
    try:
        for step in loc:
            opener = text[position]
            if (opener, type(step)) not in (("{", str), ("[", int)):
                break
            found, cursor, index = None, position + 1, 0
            while found is None:
                cursor = _skip_blanks(text, cursor)
                if text[cursor] in "]}":
                    break
                if opener == "{":
                    key, cursor = decoder.raw_decode(text, cursor)
                    cursor = _skip_blanks(text, _skip_blanks(text, cursor) + 1)  # past the colon
                    hit = key == step
                else:
                    hit, index = index == step, index + 1
                if hit:
                    found = cursor
                    break
                _, cursor = decoder.raw_decode(text, cursor)
                cursor = _skip_blanks(text, cursor)
                cursor += text[cursor] == ","
            if found is None:
                break
            position = found
    except (IndexError, ValueError):
        pass  # the locator is best effort: the message still names the field
    return text.count("\n", 0, position)


# The first character of each line that is not blank (bytes.strip's whitespace), found without copying the lines.
_LINE_START = re.compile(rb"^[ \t\r\x0b\x0c]*([^ \t\r\x0b\x0c\n])", re.MULTILINE)


def _looks_like_jsonl(path: Path, data: bytes) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    if path.suffix.lower() == ".json":
        return False
    lines = 0
    for match in _LINE_START.finditer(data):
        if match.group(1) not in (b"{", b"["):
            return False
        lines += 1
    return lines > 1


def _jsonl_entries(path: Path, data: bytes) -> Iterator[Trajectory | TrajectoryLoadError]:
    for line in text_lines(data):
        if line.error is not None:
            yield TrajectoryLoadError(f"{path}:{line.number}", str(line.error))
        elif not line.blank:
            yield _load_entry(line, path)


def _load_entry(line: TextLine, path: Path) -> Trajectory | TrajectoryLoadError:
    try:
        return _load_one(line.text, str(path), line.number, f"{path.stem}:{line.number}")
    except TrajectoryLoadError as error:
        return error


_STARTS_AN_ARRAY = re.compile(rb"[ \t\r\n]*\[")


def _array_entries(path: Path, text: str) -> Iterator[tuple[str, int, str]] | None:
    """(JSON text, first line, default id) of each trajectory of a .json file that is a JSON array of trajectory
    objects: each element is an entry that starts on its own line, and one bad element costs only itself. None for
    any other document (one trajectory)."""
    spans = top_level_array_spans(text)
    if not (spans and _is_trajectory_array(text, spans)):
        return None
    return ((text[start:end], text.count("\n", 0, start) + 1, f"{path.stem}:{index + 1}")
            for index, (start, end) in enumerate(spans))


def _is_trajectory_array(text: str, spans: list[tuple[int, int]]) -> bool:
    """Whether every element that decodes on its own is a trajectory object (at least one must): a bare list of
    chat messages is one trajectory, not many."""
    decoded_any = False
    for start, end in spans:
        try:
            element = _decode(text[start:end])
        except _Problem:
            continue
        if not (isinstance(element, dict) and "messages" in element):
            return False
        decoded_any = True
    return decoded_any


def iter_trajectory_file(path: str | Path) -> Iterator[Trajectory | TrajectoryLoadError]:
    """Yields every trajectory of a .json or .jsonl file; a bad entry is yielded as a TrajectoryLoadError. Only a
    regular file is read (a device or a FIFO is a TrajectoryLoadError: rubrics.input_files), and one of at most
    MAX_TRAJECTORY_FILE_BYTES (a larger one is a TrajectoryLoadError naming its size and the limit, read not at
    all); an Inspect .eval zip has the limits of its reader."""
    from rubrics import input_files
    from rubrics.input_files import check_input_file, read_input_file

    path = Path(path)
    zipped = path.suffix.lower() == ".eval"   # a zip, read member by member: never read whole into memory
    try:
        if zipped:
            check_input_file(path)
        else:
            data = read_input_file(path, input_files.MAX_TRAJECTORY_FILE_BYTES)
            if data.startswith(b"\xef\xbb\xbf"):   # a UTF-8 byte order mark is no content
                data = data[3:]
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        yield TrajectoryLoadError(str(path), f"cannot read: {error}")
        return
    if zipped:
        yield from _adapter_file(path)
        return
    if re.fullmatch(rb"\s*", data):   # blank (no copy of a large file made to tell)
        yield TrajectoryLoadError(f"{path}:1", "empty file")
        return
    if path.suffix.lower() == ".eval" or data[:4] == b"PK\x03\x04":   # a zip: an Inspect .eval log
        yield from _adapter_file(path)
        return
    if _looks_like_jsonl(path, data):
        yield from _jsonl_entries(path, data)
        return
    try:
        text = decode_utf8(data)
    except JSONTextError as error:
        yield TrajectoryLoadError(f"{path}:{error.line}", str(error))
        return
    entries = _array_entries(path, text) if _STARTS_AN_ARRAY.match(data) else None
    if entries is not None:
        del data
        for entry, line, default_id in entries:
            yield _loaded_or_error(entry, path, line, default_id)
        return
    # One document: only its bytes are kept while it loads (the smallest form of it; _load_one decodes them)
    del text
    # an Inspect log in it holds many samples (a cheap look before decoding)
    several = _several(data, path, 1) if re.match(rb"\s*\{", data) and b'"samples"' in data else None
    if several is not None:
        yield from several
        return
    yield _loaded_or_error(data, path, 1, path.stem)


def _loaded_or_error(entry: str | bytes, path: Path, line: int, default_id: str) -> Trajectory | TrajectoryLoadError:
    try:
        return _load_one(entry, str(path), line, default_id)
    except TrajectoryLoadError as error:
        return error


def _several(text: bytes, path: Path, line: int) -> list[Trajectory | TrajectoryLoadError] | None:
    """Each trajectory of a document (its UTF-8 bytes) that an adapter reads as several (an Inspect log's samples);
    None otherwise."""
    try:
        data = _decode(text.decode("utf-8"))
        adapted = _adapted(data)
    except _Problem:
        return None   # _load_one decodes it again and reports where it fails
    if adapted is None or len(adapted) == 1:
        return None
    out: list[Trajectory | TrajectoryLoadError] = []
    for index, entry in enumerate(adapted):
        where = f"{path}:{line}: samples[{index}]"
        try:
            trajectory = _validate(entry, f"{path.stem}:{index + 1}")
        except _Problem as problem:
            out.append(TrajectoryLoadError(where, problem.message))
            continue
        trajectory.source = where
        out.append(trajectory)
    return out


def _adapter_file(path: Path) -> Iterator[Trajectory | TrajectoryLoadError]:
    """A binary log an adapter reads itself (an Inspect .eval zip): each sample, or its error."""
    from rubrics.trajectory.adapters import AdapterError
    from rubrics.trajectory.adapters.inspect_log import INSPECT_LOG

    try:
        for where, entry in INSPECT_LOG.read_file(path):
            source = f"{path}: {where}"
            if isinstance(entry, AdapterError):
                yield TrajectoryLoadError(source, f"{INSPECT_LOG.name}: {entry}")
                continue
            try:
                trajectory = _validate(entry, None)
            except _Problem as problem:
                yield TrajectoryLoadError(source, problem.message)
                continue
            trajectory.source = source
            yield trajectory
    except AdapterError as error:
        yield TrajectoryLoadError(str(path), f"{INSPECT_LOG.name}: {error}")


def load_trajectory(src: str | Path | dict | list | Trajectory) -> Trajectory:
    """Loads one trajectory from a path, JSON text, a dict, a list of chat messages, or a Trajectory."""
    if isinstance(src, Trajectory):
        return src
    if isinstance(src, dict | list):
        try:
            return _validate(src, None)
        except _Problem as problem:
            raise TrajectoryError(f"<trajectory>: {problem.message}") from None
    if not isinstance(src, str | Path):
        raise TrajectoryError(f"cannot load a trajectory from {type(src).__name__}")
    if isinstance(src, str) and src.lstrip()[:1] in ("{", "[") and not looks_like_path(src):
        return _load_one(src, "<text>", 1, None)
    entries = list(iter_trajectory_file(src))
    if len(entries) != 1:
        raise TrajectoryError(f"{src}: holds {len(entries)} trajectories; iter_trajectory_file() reads several")
    if isinstance(entries[0], TrajectoryLoadError):
        raise entries[0]
    return entries[0]
