"""A trajectory laid out for the page: its parts in reading order (messages, tool calls with their arguments and
results, the final answer, emails, files, tests), each a plain title and text.

Loading goes the one way from paths to trajectories that `rubric grade` goes (rubrics.trajectory.paths: directories
contribute their trajectory files, sorted), so the viewer reads exactly what the grader read.
"""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rubrics.trajectory import Email, Trajectory
from rubrics.trajectory.paths import read_paths

PartKind = Literal["message", "tool_call", "tool_result", "final_answer", "email", "file", "test"]


class TrajectoryPart(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: PartKind
    title: str
    text: str
    number: int | None = None     # emails: the 1-based number checks cite ("email #2")
    marks: list[str] = []         # ids of the items whose evidence points here (filled by evidence_marks)


class TrajectoryView(BaseModel):
    model_config = ConfigDict(frozen=True)
    trajectory_id: str
    task_id: str | None
    source: str | None
    parts: list[TrajectoryPart]


def load_trajectories(paths: list[str]) -> tuple[dict[str, Trajectory], list[str]]:
    """Trajectories by id (the first of a repeated id wins) and the loading errors, one line each."""
    loaded, errors = read_paths(paths)
    by_id: dict[str, Trajectory] = {}
    for trajectory in loaded:
        by_id.setdefault(trajectory.id, trajectory)
    return by_id, errors


def lay_out(trajectory: Trajectory) -> TrajectoryView:
    parts: list[TrajectoryPart] = []
    call_names: dict[str, str] = {}
    for message in trajectory.messages:
        if message.role == "tool":
            called = call_names.get(message.tool_call_id or "", message.name or message.tool_call_id or "a tool")
            parts.append(TrajectoryPart(kind="tool_result", title=f"result of {called}", text=message.content or ""))
            continue
        if message.content:
            title = message.role + (f" ({message.name})" if message.name else "")
            parts.append(TrajectoryPart(kind="message", title=title, text=message.content))
        for call in message.tool_calls:
            if call.id:
                call_names[call.id] = call.name
            parts.append(TrajectoryPart(kind="tool_call", title=f"tool call {call.name}",
                                        text=json.dumps(call.arguments, indent=2, ensure_ascii=False, default=str)))
    if trajectory.final_answer is not None:
        parts.append(TrajectoryPart(kind="final_answer", title="final answer", text=trajectory.final_answer))
    for number, email in enumerate(trajectory.emails(), start=1):
        parts.append(TrajectoryPart(kind="email", title=f"email #{number}", text=_email_text(email), number=number))
    for path, content in trajectory.state.files.items():
        parts.append(TrajectoryPart(kind="file", title=f"file {path}", text=content))
    for name, outcome in trajectory.state.tests.items():
        parts.append(TrajectoryPart(kind="test", title=f"test {name}", text=outcome))
    return TrajectoryView(trajectory_id=trajectory.id, task_id=trajectory.task_id, source=trajectory.source,
                          parts=parts)


def _email_text(email: Email) -> str:
    lines = [f"from: {email.from_}", f"to: {', '.join(email.to)}"]
    lines += [f"cc: {', '.join(email.cc)}"] if email.cc else []
    lines += [f"bcc: {', '.join(email.bcc)}"] if email.bcc else []
    lines += [f"subject: {email.subject}", "", email.body]
    for attachment in email.attachments:
        lines += ["", f"attachment {attachment.name}:", attachment.content]
    return "\n".join(lines)
