"""Trajectory format v1: the pydantic model of one trajectory.

A trajectory is one JSON object: `id`, optional `task_id`, the chat `messages` (role, content, tool calls),
an optional `final_answer`, the end `state` (`outbox` emails, `files`, `tests` results) and free `metadata`.
Also accepted: OpenAI tool calls whose arguments are a JSON string, and content given as a list of parts.
"""
from __future__ import annotations

import json
from typing import Any

from collections.abc import Collection

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from rubrics.trajectory.sends import SEND_EMAIL_TOOL, Sends


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


class _CompactModel(BaseModel):
    """A model a trajectory holds by the hundred thousand, frozen so that it can drop pydantic's per-instance
    bookkeeping: a set of the fields given (216 bytes) shared between instances given the same declared fields,
    and an empty extras dict (64 bytes) kept as None (pydantic reads None as no extras). A message of short text
    costs about 270 bytes instead of 610 (with its tool_calls a tuple, the empty one shared)."""
    model_config = ConfigDict(extra="allow", frozen=True)

    def model_post_init(self, context: Any) -> None:
        given = self.__pydantic_fields_set__
        if given <= self.__pydantic_fields__.keys():   # only declared names: at most 2^fields shared sets
            object.__setattr__(self, "__pydantic_fields_set__", _SHARED_FIELD_SETS.setdefault(frozenset(given), given))
        if not self.__pydantic_extra__:
            object.__setattr__(self, "__pydantic_extra__", None)


_SHARED_FIELD_SETS: dict[frozenset[str], set[str]] = {}


class ToolCall(_CompactModel):

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


_ROLES = {role: role for role in ("system", "developer", "user", "assistant", "tool", "function")}


class Message(_CompactModel):

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()   # a tuple: the empty one is shared, and a message is frozen anyway
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
        role = data.get("role")
        if isinstance(role, str):   # one string object per role, not one per message (a long chat holds many)
            data["role"] = _ROLES.get(role, role)
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
        """The sent emails: state.outbox, else the send tool calls whose result reports no failure (sends.py)."""
        return self.sends().emails

    def sends(self, senders: Collection[str] | None = None) -> Sends:
        """The emails sent, each with where it was read from, and the send calls that failed; senders: the tools
        that send, by exact name (None: send_email, bare or behind a server prefix). Cached per sender list."""
        key = "sends" if senders is None else "sends:" + "\x00".join(sorted(senders))
        return self.cached(key, lambda: Sends.read(self.state.outbox, self.messages, senders, _email_from_call))


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
