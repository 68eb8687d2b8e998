"""OpenAI Responses API: a response object (`{"object": "response", "output": [...]}`), or a list of input/output
items (`message`, `function_call`, `function_call_output`, `reasoning`), as a conversation is replayed with
`input=`. As the API does, an item may be an easy input message with no `type` (`{"role": "user", "content":
"..."}`, role user, assistant, system or developer): it is a `message`.

Items map to messages in order: a `message` keeps its role and text; consecutive `function_call`s join the
assistant message before them (or a new one) as tool calls, their `arguments` JSON text parsed; a
`function_call_output` becomes a `tool` message with its `call_id`; a `reasoning` item's summary text goes on
the next assistant message as `reasoning` (no check reads it; it is kept for the judge's transcript and for
people). Other item types (web_search_call, ...) become assistant tool calls named after their type.
"""
from __future__ import annotations

from typing import Any

from rubrics.trajectory.adapters.base import AdapterError, text_of

ITEM_TYPES = {"message", "function_call", "function_call_output", "reasoning"}


EASY_ROLES = {"user", "assistant", "system", "developer"}


def _is_typed(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def _is_easy_message(value: Any) -> bool:
    """An easy input message: `{"role": "user", "content": ...}` with no `type` (the API reads it as a message)."""
    return (isinstance(value, dict) and value.get("type") is None and isinstance(value.get("role"), str)
            and value["role"] in EASY_ROLES and "content" in value)


def _is_item(value: Any) -> bool:
    return _is_typed(value) or _is_easy_message(value)


class OpenAIResponses:
    name = "openai-responses"

    def detects(self, data: Any) -> bool:
        if isinstance(data, dict) and data.get("object") == "response" and isinstance(data.get("output"), list):
            return True
        if isinstance(data, dict) and isinstance(data.get("input"), list) and "messages" not in data:
            data = data["input"]
        return (isinstance(data, list) and bool(data) and all(_is_item(i) for i in data)
                and any(_is_typed(i) and i["type"] in ITEM_TYPES - {"message"} for i in data))

    def convert(self, data: Any) -> list[dict[str, Any]]:
        trajectory: dict[str, Any] = {}
        if isinstance(data, dict):
            if data.get("object") == "response":
                trajectory["id"] = data.get("id")
                items = list(data.get("output") or [])
                if isinstance(data.get("instructions"), str):
                    items.insert(0, {"type": "message", "role": "system", "content": data["instructions"]})
                trajectory["metadata"] = {key: data[key] for key in ("model", "status") if key in data}
            else:
                items = data["input"] + list(data.get("output") or [])
                trajectory.update({k: data[k] for k in ("id", "task_id", "metadata", "state") if k in data})
        else:
            items = data
        trajectory["messages"] = self.messages(items)
        return [{k: v for k, v in trajectory.items() if v is not None}]

    def messages(self, items: list) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for index, item in enumerate(items):
            if not _is_item(item):
                raise AdapterError(f"field output[{index}]: expected an item object with a type, or a message "
                                   f"with a role ({', '.join(sorted(EASY_ROLES))}) and content")
            kind = item.get("type") or "message"
            if kind == "message":
                message = {"role": item.get("role") or "assistant", "content": text_of(item.get("content"))}
                if reasoning and message["role"] == "assistant":
                    message["reasoning"] = "\n".join(reasoning)
                    reasoning = []
                messages.append(message)
            elif kind == "reasoning":
                summary = text_of(item.get("summary")) or text_of(item.get("content"))
                if summary:
                    reasoning.append(summary)
            elif kind == "function_call_output" or kind.endswith("_call_output"):
                messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                                 "content": text_of(item.get("output"))})
            else:
                call = ({"id": item.get("call_id") or item.get("id"), "name": item.get("name"),
                         "arguments": item.get("arguments")} if kind == "function_call"
                        else {"id": item.get("id"), "name": kind,
                              "arguments": {k: v for k, v in item.items() if k not in ("type", "id", "status")}})
                if not isinstance(call["name"], str) or not call["name"]:
                    raise AdapterError(f"field output[{index}].name: a function_call needs a name")
                last = messages[-1] if messages else None
                if last is None or last["role"] != "assistant":
                    last = {"role": "assistant", "content": None}
                    messages.append(last)
                last.setdefault("tool_calls", []).append(call)
                if reasoning:
                    last["reasoning"] = "\n".join(reasoning)
                    reasoning = []
        return messages


OPENAI_RESPONSES = OpenAIResponses()
