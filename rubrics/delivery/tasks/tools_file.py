"""tools.json: the tools a task lets the model call, as names or OpenAI-style tool definitions."""
from __future__ import annotations

import json
from pathlib import Path

TOOLS_FILE = "tools.json"


def read_tool_names(path: Path) -> list[str]:
    """Tool names declared in tools.json; raises ValueError saying what is malformed.

    Accepted shapes: ["bash", ...], [{"name": "bash", ...}, ...], [{"type": "function",
    "function": {"name": "bash", ...}}, ...], or any of these under a top-level "tools" key.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise ValueError("must be a list of tools (or an object with a 'tools' list)")
    names = []
    for index, tool in enumerate(data):
        name = _tool_name(tool)
        if not name:
            raise ValueError(f"tool [{index}] has no name")
        names.append(name)
    return names


def _tool_name(tool: object) -> str | None:
    if isinstance(tool, str):
        return tool
    if isinstance(tool, dict):
        inner = tool.get("function")
        if isinstance(inner, dict):
            tool = inner
        name = tool.get("name")
        return name if isinstance(name, str) else None
    return None
