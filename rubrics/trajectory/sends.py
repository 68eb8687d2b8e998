"""Which emails a trajectory sent: `state.outbox` when the environment wrote one, else the send tool calls whose
result does not report a failure.

A policy writes tool calls, not their results, so a call alone proves nothing: a made-up tool, a `cancel_send_email`
or a send the mail server refused must not meet `email_sent`. Two rules keep a call from counting:

- its tool is not a sender: by default `send_email`, or `send_email` behind an MCP-style server prefix
  (`gmail__send_email`, `mail.send_email`, `mail/send_email`, `mail:send_email`), never a longer name that merely
  ends in `_send_email`; a rubric's `email_sent: {senders: [...]}` names its senders exactly instead;
- its result reports a failure (`result_failure` below says how that is read). A call with no result at all still
  counts: many logs record calls only.
"""
from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

# format.py (the trajectory's models) imports this module, so the models are not imported here: an email is
# format.Email, a message format.Message, a call format.ToolCall
Email = Message = ToolCall = Any

SEND_EMAIL_TOOL = "send_email"

SERVER_SEPARATORS = ("__", ".", "/", ":")
# The start of a tool result that reports a failure, casefolded; "Error: ...", "FAILED to send", "Cancelled by user".
_FAILED_TEXT = re.compile(r"\W*(error|errors|failed|failure|fail|cancel+ed|exception|traceback|not sent|unknown tool"
                          r"|no such tool|permission denied|access denied|denied|rejected|invalid|unauthori[sz]ed"
                          r"|forbidden|timed? ?out)\b")
_FAILED_STATUS = frozenset({"error", "failed", "failure", "fail", "cancelled", "canceled", "rejected", "denied",
                            "invalid", "timeout", "not_sent", "unsent"})
_RESULT_HEAD = 200   # characters of a text result read for a failure word; a JSON result is read whole


@dataclass(frozen=True)
class Send:
    """One email the trajectory sent, and where it was read from: "state.outbox #2" or "send_email call c1"."""
    email: Email
    origin: str


def call_origin(call: ToolCall) -> str:
    return f"{call.name} call {call.id}" if call.id else f"{call.name} call"


@dataclass(frozen=True)
class FailedSend:
    """A send call that did not count, and why."""
    origin: str
    reason: str


@dataclass(frozen=True)
class Sends:
    sent: list[Send]
    failed: list[FailedSend]
    from_outbox: bool

    @property
    def emails(self) -> list[Email]:
        return [send.email for send in self.sent]

    @classmethod
    def read(cls, outbox: list[Email] | None, messages: list[Message], senders: Collection[str] | None,
             email_of: Any) -> Sends:
        """state.outbox when there is one, else the sender calls of messages whose result reports no failure;
        email_of: a call's Email."""
        if outbox is not None:
            return cls([Send(email, f"state.outbox #{number}") for number, email in enumerate(outbox, start=1)],
                       [], True)
        sent, failed = [], []
        for call, result in calls_with_results(messages):
            if not is_sender(call.name, senders):
                continue
            failure = result_failure(result) if result is not None else None
            if failure is not None:
                failed.append(FailedSend(call_origin(call), failure))
            else:
                sent.append(Send(email_of(call), call_origin(call)))
        return cls(sent, failed, False)


def is_sender(name: str, senders: Collection[str] | None = None) -> bool:
    """senders: the exact names a rubric gave; None: `send_email`, bare or behind an MCP-style server prefix."""
    if senders is not None:
        return name in senders
    return name == SEND_EMAIL_TOOL or any(
        name.endswith(separator + SEND_EMAIL_TOOL) and len(name) > len(separator + SEND_EMAIL_TOOL)
        and not name[:-len(separator + SEND_EMAIL_TOOL)].endswith("_")
        for separator in SERVER_SEPARATORS)


def calls_with_results(messages: list[Message]) -> list[tuple[ToolCall, Message | None]]:
    """Each tool call with the tool message that answers it: the one with its id, else (a log without ids) the
    next tool message without an id after the call's message, in order."""
    by_id = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    anonymous = [i for i, m in enumerate(messages) if m.role == "tool" and not m.tool_call_id]
    pairs, cursor = [], 0
    for index, message in enumerate(messages):
        for call in message.tool_calls:
            if call.id:
                pairs.append((call, by_id.get(call.id)))
                continue
            while cursor < len(anonymous) and anonymous[cursor] <= index:
                cursor += 1
            pairs.append((call, messages[anonymous[cursor]] if cursor < len(anonymous) else None))
            cursor += cursor < len(anonymous)
    return pairs


def result_failure(result: Message) -> str | None:
    """Why a tool result reports a failure, or None when it does not. Read, in order: an `is_error: true` or a
    non-empty `error` field on the message (Anthropic's and Inspect's logs); content that is a JSON object with a
    non-empty `error`, `ok: false`, `success: false`, or a `status` such as error, failed, cancelled, rejected;
    text content whose first words are a failure word (error, failed, cancelled, exception, not sent, unknown
    tool, denied, rejected, invalid, unauthorized, forbidden, timeout)."""
    extra = result.model_extra or {}
    if extra.get("is_error") is True:
        return "its result has is_error: true"
    if extra.get("error"):
        return f"its result has error {_short(extra['error'])}"
    content = (result.content or "").strip()
    verdict = _json_failure(content)
    if verdict is not None:
        return verdict
    if _FAILED_TEXT.match(content[:_RESULT_HEAD].casefold()):
        return f"its result reads {_short(content)}"
    return None


def _json_failure(content: str) -> str | None:
    if not content.startswith("{"):
        return None
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("error"):
        return f"its result has error {_short(data['error'])}"
    for flag in ("ok", "success"):
        if data.get(flag) is False:
            return f"its result has {flag}: false"
    status = data.get("status")
    if isinstance(status, str) and status.strip().casefold().replace(" ", "_") in _FAILED_STATUS:
        return f"its result has status {status!r}"
    return None


def _short(value: object, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")
