"""Anthropic Messages API: a request (`{"system": ..., "messages": [...]}`), a response message
(`{"type": "message", "role": "assistant", "content": [...]}`), or a list of messages, with content blocks.

Blocks map to our messages: `text` blocks are the message's text; `tool_use` blocks are its tool calls (`input`
is the arguments); each `tool_result` block (sent in a user turn) becomes a `tool` message of its own with the
`tool_use_id` as `tool_call_id`, its `is_error` kept, so tool outputs are told apart from what the user said;
`thinking` blocks go on the message as `reasoning`. Recognised by a `tool_use` or `tool_result` block, a
top-level `system`, or the response shape; other message lists load as they are.
"""
from __future__ import annotations

from typing import Any

from rubrics.trajectory.adapters.base import AdapterError, text_of

TOOL_BLOCKS = {"tool_use", "tool_result", "server_tool_use"}


def _blocks(message: Any) -> list:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _has_tool_blocks(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(block, dict) and block.get("type") in TOOL_BLOCKS for m in messages for block in _blocks(m))


class AnthropicMessages:
    name = "anthropic-messages"

    def detects(self, data: Any) -> bool:
        if isinstance(data, dict) and data.get("type") == "message" and data.get("role") == "assistant" \
                and isinstance(data.get("content"), list):
            return True
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            system = data.get("system")
            return _has_tool_blocks(data["messages"]) or (
                isinstance(system, (str, list)) and all(isinstance(m, dict) for m in data["messages"]))
        return _has_tool_blocks(data) and all(isinstance(m, dict) and "role" in m for m in data)

    def convert(self, data: Any) -> list[dict[str, Any]]:
        if isinstance(data, dict) and data.get("type") == "message":
            trajectory = {"id": data.get("id"), "messages": self.messages([data]),
                          "metadata": {k: data[k] for k in ("model", "stop_reason") if k in data}}
            return [{k: v for k, v in trajectory.items() if v is not None}]
        if isinstance(data, list):
            return [{"messages": self.messages(data)}]
        trajectory = {k: v for k, v in data.items() if k not in ("system", "messages", "model", "max_tokens",
                                                                  "tools", "tool_choice")}
        messages = self.messages(data["messages"])
        if data.get("system"):
            messages.insert(0, {"role": "system", "content": text_of(data["system"])})
        trajectory["messages"] = messages
        return [trajectory]

    def messages(self, raw: list) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index, message in enumerate(raw):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise AdapterError(f"field messages[{index}]: expected a message object with a role")
            content = message.get("content")
            if not isinstance(content, list):
                out.append({"role": message["role"], "content": text_of(content)})
                continue
            texts, calls, thinking, results = [], [], [], []
            for b, block in enumerate(content):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind in ("tool_use", "server_tool_use"):
                    if not isinstance(block.get("name"), str):
                        raise AdapterError(f"field messages[{index}].content[{b}].name: a tool_use needs a name")
                    calls.append({"id": block.get("id"), "name": block["name"], "arguments": block.get("input")})
                elif kind == "tool_result":
                    results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                                    "content": text_of(block.get("content")),
                                    **({"is_error": True} if block.get("is_error") else {})})
                elif kind in ("thinking", "redacted_thinking"):
                    thinking.append(block.get("thinking") or "[redacted thinking]")
                else:
                    texts.append(text_of(block))
            out += results   # tool results answer the calls before this turn: they come first
            if texts or calls or not results:
                converted: dict[str, Any] = {"role": message["role"], "content": "\n".join(t for t in texts if t)}
                if calls:
                    converted["tool_calls"] = calls
                if thinking:
                    converted["reasoning"] = "\n".join(thinking)
                out.append(converted)
        return out


ANTHROPIC_MESSAGES = AnthropicMessages()
