"""What a trajectory adapter provides."""
from __future__ import annotations

from typing import Any, Protocol


class AdapterError(ValueError):
    """Data that an adapter recognised but cannot convert; the message names the field."""


class Adapter(Protocol):
    name: str

    def detects(self, data: Any) -> bool:
        """Whether the decoded JSON value has this framework's shape (cheap: looks at keys and types only)."""
        ...

    def convert(self, data: Any) -> list[dict[str, Any]]:
        """The trajectories (dicts in our format) in the data: one for a conversation, several for a log of many
        samples. Raises AdapterError naming the field that is wrong."""
        ...


def text_of(value: Any) -> str:
    """Text content given as a string or a list of typed blocks: the text blocks joined by newlines."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [text_of(block) for block in value]
        return "\n".join(part for part in parts if part)
    if isinstance(value, dict):
        for key in ("text", "output_text", "refusal", "reasoning"):
            if isinstance(value.get(key), str):
                return value[key]
        if isinstance(value.get("type"), str):
            return f"[{value['type']}]"   # an image or file block: a marker, not its bytes
    return ""


def require(data: dict, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise AdapterError(f"field {where}{key}: expected {names}, got {type(value).__name__}")
    return value
