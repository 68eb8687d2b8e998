"""Trajectory format v1: the pydantic model and the loaders for the accepted input shapes.

A trajectory is one JSON object: `id`, optional `task_id`, the chat `messages` (role, content, tool calls),
an optional `final_answer`, the end `state` (`outbox` emails, `files`, `tests` results) and free `metadata`.
A .json file holds one trajectory or an array of them; a .jsonl file holds one a line. Also accepted: a bare
list of OpenAI chat messages, OpenAI tool calls whose arguments are a JSON string, and content given as a
list of parts. Loading never lets a pydantic, JSON or decoding error escape: a broken trajectory becomes a
`TrajectoryError` whose message names the file, the line (and column, where there is one) and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from rubrics.json_text import MAX_NESTING  # noqa: F401 - re-exported: the nesting limit is part of the format
from rubrics.json_text import JSONTextError, TextLine, decode_utf8, text_lines, top_level_array_spans
from rubrics.json_text import loads as _loads_json

SEND_EMAIL_TOOL = "send_email"


class TrajectoryError(ValueError):
    """One trajectory that cannot be loaded; the message names file, line and field."""


class TrajectoryLoadError(TrajectoryError):
    """A bad entry of a trajectory file, yielded as a value by `iter_trajectory_file` so the rest still load."""

    def __init__(self, source: str, message: str):
        super().__init__(f"{source}: {message}")
        self.source = source
        self.message = message


def _as_text(value: Any) -> str | None:
    """Flattens message content: list-of-parts content keeps its text parts, other JSON is dumped."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [_part_text(part) for part in value]
        return "\n".join(text for text in texts if text)
    if isinstance(value, dict):
        return _part_text(value)
    return json.dumps(value, ensure_ascii=False)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return part["text"]
        if part.get("type") == "tool_result":
            return _as_text(part.get("content")) or ""
        if part.get("type") == "tool_use":
            return ""  # becomes a ToolCall, see Message._normalize
        if isinstance(part.get("type"), str):
            return f"[{part['type']}]"  # an image or audio part: a marker, not a base64 blob in the text
    return json.dumps(part, ensure_ascii=False) if part is not None else ""


def _parse_arguments(raw: Any) -> dict[str, Any]:
    """OpenAI sends arguments as a JSON string; bad JSON is kept raw rather than sinking the trajectory."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):   # RecursionError: arguments nested past the interpreter's limit
            return {"_raw": raw}
        return parsed if isinstance(parsed, dict) else {"_raw": raw}
    return {"_raw": raw}


def _as_address_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        parts = [p.strip() for p in value.replace(";", ",").split(",")]
        # "a@x, b@y" is two recipients; "Doe, Jane <j@x>" is one, so split only when every piece is an address.
        if len(parts) > 1 and all("@" in p for p in parts):
            return parts
        return [value.strip()] if value.strip() else []
    if isinstance(value, dict):
        return [_address_from_dict(value)]
    if isinstance(value, list):
        return [_address_from_dict(v) if isinstance(v, dict) else str(v) for v in value if v is not None]
    return [str(value)]


def _address_from_dict(value: dict) -> str:
    address = str(value.get("email") or value.get("address") or "")
    name = value.get("name")
    return f"{name} <{address}>" if name and address else address or json.dumps(value)


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | None = None
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        function = data.pop("function", None)
        if isinstance(function, dict):  # OpenAI: {"type": "function", "function": {"name", "arguments"}}
            data.setdefault("name", function.get("name"))
            data.setdefault("arguments", function.get("arguments"))
        for alias in ("input", "args"):  # Anthropic tool_use parts, and common hand-written logs
            if alias in data and "arguments" not in data:
                data["arguments"] = data.pop(alias)
        data["arguments"] = _parse_arguments(data.get("arguments"))
        if data.get("id") is not None and not isinstance(data["id"], str):
            data["id"] = str(data["id"])
        return data


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        content = data.get("content")
        calls = list(data.get("tool_calls") or [])
        if isinstance(content, list):
            calls += [part for part in content if isinstance(part, dict) and part.get("type") == "tool_use"]
        legacy = data.pop("function_call", None)
        if isinstance(legacy, dict):  # pre-2024 OpenAI single function call
            calls.append({"function": legacy})
        data["tool_calls"] = calls
        data["content"] = _as_text(content)
        return data

    @field_validator("tool_call_id", "name", mode="before")
    @classmethod
    def _number_is_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Attachment(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    content: str = ""

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, dict) and "name" not in data:
            data = dict(data)
            data["name"] = data.get("filename") or data.get("path") or data.get("file") or ""
        if isinstance(data, dict) and not isinstance(data.get("content", ""), str):
            data = dict(data)
            data["content"] = _as_text(data["content"]) or ""
        return data


class Email(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_: str = Field("", alias="from")
    to: list[str] = Field(default_factory=list)
    cc: list[str] = Field(default_factory=list)
    bcc: list[str] = Field(default_factory=list)
    subject: str = ""
    body: str = ""
    attachments: list[Attachment] = Field(default_factory=list)

    @field_validator("to", "cc", "bcc", mode="before")
    @classmethod
    def _addresses(cls, value: Any) -> list[str]:
        return _as_address_list(value)

    @field_validator("from_", "subject", "body", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return _as_text(value) or ""

    @field_validator("attachments", mode="before")
    @classmethod
    def _attachment_list(cls, value: Any) -> Any:
        if value is None:
            return []
        return value if isinstance(value, list) else [value]

    def recipients(self) -> list[str]:
        return [*self.to, *self.cc, *self.bcc]


class State(BaseModel):
    model_config = ConfigDict(extra="allow")

    outbox: list[Email] | None = None
    files: dict[str, str] = Field(default_factory=dict)
    tests: dict[str, str] = Field(default_factory=dict)

    @field_validator("files", "tests", mode="before")
    @classmethod
    def _text_values(cls, value: Any) -> Any:
        # A JSON file stored as an object is still a file: keep it as its JSON text.
        if isinstance(value, dict):
            return {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in value.items()}
        return value


class Trajectory(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    task_id: str | None = None
    messages: list[Message] = Field(default_factory=list)
    final_answer: str | None = None
    state: State = Field(default_factory=State)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: SkipJsonSchema[str | None] = Field(None, exclude=True)  # "file:line" it was loaded from

    # Selector renderings and derived lists, computed once: a trajectory is graded by many checks.
    # The cache assumes a loaded trajectory is not mutated afterwards.
    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    @field_validator("id", "task_id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("final_answer", mode="before")
    @classmethod
    def _final_text(cls, value: Any) -> Any:
        return _as_text(value)

    @field_validator("state", "metadata", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    def cached(self, key: str, compute):
        """Returns the cached value for key, computing it once (used by selectors and checks)."""
        cache = self.__pydantic_private__["_cache"]  # direct: private-attribute lookup is slow on hot paths
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def final_text(self) -> str:
        if self.final_answer is not None:
            return self.final_answer
        for message in reversed(self.messages):
            if message.role == "assistant" and message.content:
                return message.content
        return ""

    def tool_calls(self) -> list[ToolCall]:
        return self.cached("tool_calls", lambda: [c for m in self.messages for c in m.tool_calls])

    def emails(self) -> list[Email]:
        return self.cached("emails", self._compute_emails)

    def _compute_emails(self) -> list[Email]:
        if self.state.outbox is not None:
            return self.state.outbox
        return [_email_from_call(call) for call in self.tool_calls() if _is_send_email(call.name)]


def _is_send_email(name: str) -> bool:
    # MCP-style names prefix the server: "gmail__send_email", "mail.send_email".
    return name == SEND_EMAIL_TOOL or any(name.endswith(sep + SEND_EMAIL_TOOL) for sep in ("_", ".", "/", ":"))


def _email_from_call(call: ToolCall) -> Email:
    args = call.arguments
    data = {key: args[key] for key in ("from", "to", "cc", "bcc", "subject", "body") if key in args}
    attachments = args.get("attachments", args.get("attachment"))
    if attachments is not None:
        data["attachments"] = attachments
    try:
        return Email.model_validate(data)
    except ValidationError:
        # Odd argument shapes must not hide the recipients: keep what validates on its own.
        return Email(to=data.get("to"), cc=data.get("cc"), bcc=data.get("bcc"))


# ---------------------------------------------------------------------------------------------- loading


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
    from rubrics.adapters import AdapterError, find_adapter

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
    if data.get("id") is None:
        data = {**data, "id": default_id or _default_id(data)}
    try:
        return Trajectory.model_validate(data)
    except ValidationError as error:
        raise _Problem(_format_validation_error(error), loc=tuple(error.errors()[0]["loc"])) from None
    except (TypeError, ValueError, RecursionError) as error:  # a shape no validator planned for
        raise _Problem(f"{type(error).__name__}: {error}") from None


def _decode(text: str) -> Any:
    try:
        return _loads_json(text)
    except JSONTextError as error:
        raise _Problem(str(error), error.line - 1) from None


def _load_one(text: str, path: str, line: int, default_id: str | None) -> Trajectory:
    """Decodes and validates one entry; failures become TrajectoryLoadError("path:line", message)."""
    try:
        trajectory = _validate(_decode(text), default_id)
    except _Problem as problem:
        offset = problem.line_offset or _line_offset_of(text, problem.loc)
        raise TrajectoryLoadError(f"{path}:{line + offset}", problem.message) from None
    trajectory.source = f"{path}:{line}"
    return trajectory


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


def _looks_like_jsonl(path: Path, data: bytes) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    if path.suffix.lower() == ".json":
        return False
    lines = [line for line in data.split(b"\n") if line.strip()]
    return len(lines) > 1 and all(line.lstrip()[:1] in (b"{", b"[") for line in lines)


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


def _entries(path: Path, text: str) -> Iterator[tuple[str, int, str]]:
    """Yields (JSON text, first line, default id) for each trajectory in a .json file: each element of a JSON array
    of trajectory objects is an entry that starts on its own line, and one bad element costs only itself."""
    spans = top_level_array_spans(text)
    if not (spans and _is_trajectory_array(text, spans)):
        yield text, 1, path.stem  # _load_one decodes it and reports where it fails
        return
    for index, (start, end) in enumerate(spans):
        line = text.count("\n", 0, start) + 1
        yield text[start:end], line, f"{path.stem}:{index + 1}"


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
    regular file is read (a device or a FIFO is a TrajectoryLoadError: rubrics.input_files)."""
    from rubrics.input_files import check_input_file, read_input_file

    path = Path(path)
    zipped = path.suffix.lower() == ".eval"   # a zip, read member by member: never read whole into memory
    try:
        if zipped:
            check_input_file(path)
        else:
            data = read_input_file(path).removeprefix(b"\xef\xbb\xbf")   # a UTF-8 byte order mark is no content
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        yield TrajectoryLoadError(str(path), f"cannot read: {error}")
        return
    if zipped:
        yield from _adapter_file(path)
        return
    if not data.strip():
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
    for entry, line, default_id in _entries(path, text):
        # the whole file is one document: an Inspect log in it holds many samples (a cheap look before decoding)
        whole = default_id == path.stem and entry.lstrip().startswith("{") and '"samples"' in entry
        several = _several(entry, path, line) if whole else None
        if several is not None:
            yield from several
            continue
        try:
            yield _load_one(entry, str(path), line, default_id)
        except TrajectoryLoadError as error:
            yield error


def _several(text: str, path: Path, line: int) -> list[Trajectory | TrajectoryLoadError] | None:
    """Each trajectory of a document that an adapter reads as several (an Inspect log's samples); None otherwise."""
    try:
        data = _decode(text)
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
    from rubrics.adapters import AdapterError
    from rubrics.adapters.inspect_log import INSPECT_LOG

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
    if isinstance(src, str) and src.lstrip()[:1] in ("{", "[") and not _is_file(src):
        return _load_one(src, "<text>", 1, None)
    entries = list(iter_trajectory_file(src))
    if len(entries) != 1:
        raise TrajectoryError(f"{src}: holds {len(entries)} trajectories; iter_trajectory_file() reads several")
    if isinstance(entries[0], TrajectoryLoadError):
        raise entries[0]
    return entries[0]


def _is_file(text: str) -> bool:
    try:
        return len(text) < 4096 and Path(text).is_file()
    except (OSError, ValueError):
        return False


TRAJECTORY_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".eval", ".traj")


def is_trajectory_file(src: Any) -> bool:
    """Whether score_many reads `src` as a file of trajectories (every entry) rather than as one trajectory: a Path,
    or a string naming an existing file with a trajectory-file suffix."""
    if isinstance(src, Path):
        return True
    return (isinstance(src, str) and src.endswith(TRAJECTORY_FILE_SUFFIXES) and "\n" not in src
            and _is_file(src))
