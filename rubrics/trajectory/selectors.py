"""Selectors: which part of a trajectory a check reads (`in`) or a judge is shown (`evidence`).

Each rendering is computed once per trajectory and cached on it: a rubric runs many checks over the
same trajectory, and re-rendering the transcript for each would dominate grading time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from rubrics.trajectory import Email, Trajectory

PLAIN_SELECTORS = ("final_answer", "assistant", "transcript", "emails", "files", "tool_calls")
KNOWN_SELECTOR_PREFIXES = (*PLAIN_SELECTORS, "files.", "state.")
DEFAULT_SELECTOR = "final_answer"
# what an unknown selector is compared with for a did-you-mean (files.<path> and state.<path> by their first word)
SELECTOR_HINTS = (*PLAIN_SELECTORS, "state")
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Selection:
    text: str
    missing: str | None = None  # why text is empty: what the trajectory lacks


def is_valid_selector(selector: str) -> bool:
    if not isinstance(selector, str):
        return False
    if selector in PLAIN_SELECTORS:
        return True
    return any(selector.startswith(p) and len(selector) > len(p) for p in ("files.", "state."))


def select(trajectory: Trajectory, selector: str = DEFAULT_SELECTOR) -> Selection:
    """The text of `selector` in `trajectory`; an unknown selector raises ValueError (the linter catches it first)."""
    if not is_valid_selector(selector):
        known = ", ".join(PLAIN_SELECTORS)
        raise ValueError(f"unknown selector {selector!r}; expected one of {known}, files.<path>, state.<path>")
    return trajectory.cached(f"select:{selector}", lambda: _compute(trajectory, selector))


def _compute(trajectory: Trajectory, selector: str) -> Selection:
    if selector.startswith("files."):
        return _select_file(trajectory, selector[len("files.") :])
    if selector.startswith("state."):
        return _select_state(trajectory, selector[len("state.") :])
    return _RENDERERS[selector](trajectory)


def _or_missing(text: str, missing: str) -> Selection:
    return Selection(text) if text else Selection("", missing)


def _final_answer(t: Trajectory) -> Selection:
    return _or_missing(t.final_text(), "no final answer (final_answer is absent and no assistant message has text)")


def _assistant(t: Trajectory) -> Selection:
    texts = [m.content for m in t.messages if m.role == "assistant" and m.content]
    return _or_missing("\n\n".join(texts), "no assistant message has text")


def _transcript(t: Trajectory) -> Selection:
    lines = []
    for message in t.messages:
        label = f"{message.role} {message.name}" if message.name else message.role
        if message.content:
            lines.append(f"[{label}] {message.content}")
        lines.extend(f"[{label} -> {_render_call(c.name, c.arguments)}]" for c in message.tool_calls)
    if t.final_answer:
        lines.append(f"[final_answer] {t.final_answer}")
    return _or_missing("\n".join(lines), "the trajectory has no messages and no final answer")


_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # built once: json.dumps with options builds one per call


def _render_call(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({_JSON.encode(arguments)})"


def render_email(email: Email) -> str:
    lines = [f"From: {email.from_}"] if email.from_ else []
    lines.append(f"To: {', '.join(email.to)}")
    for label, values in (("Cc", email.cc), ("Bcc", email.bcc)):
        if values:
            lines.append(f"{label}: {', '.join(values)}")
    lines.append(f"Subject: {email.subject}")
    if email.attachments:
        lines.append(f"Attachments: {', '.join(a.name for a in email.attachments)}")
    return "\n".join(lines) + "\n\n" + email.body


def _emails(t: Trajectory) -> Selection:
    rendered = [render_email(e) for e in t.emails()]
    return _or_missing("\n\n---\n\n".join(rendered), "no emails sent")


def _files(t: Trajectory) -> Selection:
    return _or_missing(_render_files(t.state.files), "state.files is empty")


def _render_files(files: dict[str, str]) -> str:
    return "\n\n".join(f"== {path} ==\n{content}" for path, content in files.items())


def _tool_calls(t: Trajectory) -> Selection:
    calls = [_render_call(c.name, c.arguments) for c in t.tool_calls()]
    return _or_missing("\n".join(calls), "no tool calls")


_RENDERERS = {
    "final_answer": _final_answer,
    "assistant": _assistant,
    "transcript": _transcript,
    "emails": _emails,
    "files": _files,
    "tool_calls": _tool_calls,
}


def matching_files(files: dict[str, str], pattern: str) -> dict[str, str]:
    """Files whose path is `pattern` or matches it as a glob ("./" and a leading "**/" are optional)."""
    pattern = pattern.removeprefix("./")
    if pattern in files:
        return {pattern: files[pattern]}
    if not _GLOB_CHARS.search(pattern):
        return {}
    alternatives = {pattern, pattern[3:]} if pattern.startswith("**/") else {pattern}
    return {
        path: content
        for path, content in files.items()
        if any(fnmatchcase(path.removeprefix("./"), alt) for alt in alternatives)
    }


def _select_file(t: Trajectory, pattern: str) -> Selection:
    found = matching_files(t.state.files, pattern)
    if not found:
        return Selection("", f"no file matches {pattern!r} in state.files ({len(t.state.files)} files)")
    if len(found) == 1:  # a single file is returned raw so that `json` and `number` read it directly
        return Selection(next(iter(found.values())))
    return Selection(_render_files(found))


_INDEX = re.compile(r"^(.*?)\[(-?\d+)\]$")


def _select_state(t: Trajectory, path: str) -> Selection:
    value: Any = t.cached("state_dump", lambda: t.state.model_dump(by_alias=True))
    parts = path.split(".")
    walked: list[str] = []
    while parts:
        value, used, problem = _step(value, parts)
        if problem:
            where = "state." + ".".join(walked) if walked else "state"
            return Selection("", f"state.{path} not found: {problem} in {where}")
        walked.append(".".join(parts[:used]))
        parts = parts[used:]
    if value is None:
        return Selection("", f"state.{path} is null")
    return Selection(value if isinstance(value, str) else _JSON.encode(value))


def _step(value: Any, parts: list[str]) -> tuple[Any, int, str | None]:
    """Consumes one or more dotted parts; keys may contain dots (file paths), so the longest key wins."""
    if isinstance(value, dict):
        for used in range(len(parts), 0, -1):
            key = ".".join(parts[:used])
            if key in value:
                return value[key], used, None
    match = _INDEX.match(parts[0])
    if match:
        inner, problem = value, None
        if match.group(1):
            inner, _, problem = _step(value, [match.group(1)])
        if problem is None and isinstance(inner, list):
            index = int(match.group(2))
            if -len(inner) <= index < len(inner):
                return inner[index], 1, None
            return None, 1, f"index [{index}] out of range ({len(inner)} items)"
        return None, 1, problem or f"{match.group(1)!r} is not a list"
    if isinstance(value, list) and parts[0].lstrip("-").isdigit():
        index = int(parts[0])
        if -len(value) <= index < len(value):
            return value[index], 1, None
        return None, 1, f"index {index} out of range ({len(value)} items)"
    return None, 1, f"no key {parts[0]!r}"
