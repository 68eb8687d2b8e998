"""SWE-agent trajectory files (`.traj`): `{"trajectory": [steps], "history": [...], "info": {...}}`.

Each step (thought, action, observation) becomes an assistant message whose text is the thought and whose one
tool call is named after the action's command (its first word: `open`, `edit`, `str_replace_editor`, `submit`,
`ls`, ...) with the whole action as `arguments.command`, then a `tool` message with the observation. So
`tool_called: {name: submit}` and `tool_sequence: [find_file, edit, submit]` read a SWE-agent run. The task is the
first user message of `history` that is not a demonstration; `info.submission` (the patch) is the final answer,
`info.exit_status` and `info.submission` are kept in `state`, the rest of `info` in `metadata.swe_agent`.
"""
from __future__ import annotations

from typing import Any

from rubrics.trajectory.adapters.base import AdapterError, text_of


def _is_step(value: Any) -> bool:
    return isinstance(value, dict) and "action" in value and "observation" in value


def _command(action: str) -> str | None:
    words = action.strip().split(maxsplit=1)
    return words[0] if words else None


class SWEAgent:
    name = "swe-agent"

    def detects(self, data: Any) -> bool:
        steps = data.get("trajectory") if isinstance(data, dict) else None
        return isinstance(steps, list) and bool(steps) and _is_step(steps[0]) and "messages" not in data

    def convert(self, data: Any) -> list[dict[str, Any]]:
        info = data.get("info") if isinstance(data.get("info"), dict) else {}
        messages: list[dict[str, Any]] = []
        task = self.task(data)
        if task:
            messages.append({"role": "user", "content": task})
        for index, step in enumerate(data["trajectory"]):
            if not _is_step(step):
                raise AdapterError(f"field trajectory[{index}]: expected a step with action and observation")
            action = step.get("action")
            if action is not None and not isinstance(action, str):
                raise AdapterError(f"field trajectory[{index}].action: expected text, got {type(action).__name__}")
            thought = text_of(step.get("thought")) or text_of(step.get("response"))
            message: dict[str, Any] = {"role": "assistant", "content": thought}
            command = _command(action or "")
            if command:
                call_id = f"step-{index + 1}"
                message["tool_calls"] = [{"id": call_id, "name": command, "arguments": {"command": action}}]
                messages += [message, {"role": "tool", "tool_call_id": call_id,
                                       "content": text_of(step.get("observation"))}]
            else:
                messages.append(message)
        trajectory: dict[str, Any] = {"messages": messages,
                                      "metadata": {"swe_agent": {k: v for k, v in info.items() if k != "submission"}}}
        if isinstance(info.get("submission"), str):
            trajectory["final_answer"] = info["submission"]
        state = {k: info[k] for k in ("exit_status", "submission") if isinstance(info.get(k), str)}
        if state:
            trajectory["state"] = state
        return [trajectory]

    @staticmethod
    def task(data: dict) -> str:
        history = data.get("history") if isinstance(data.get("history"), list) else []
        for item in history:
            if isinstance(item, dict) and item.get("role") == "user" and not item.get("is_demo"):
                return text_of(item.get("content"))
        return ""


SWE_AGENT = SWEAgent()
