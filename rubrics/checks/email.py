"""The `email_sent` check: some sent email matches every field the rubric gives."""

from __future__ import annotations

import re
from email.utils import parseaddr
from functools import cached_property, lru_cache

from pydantic import field_validator

from rubrics.checks.base import (
    WARNING,
    CheckConfig,
    CheckOutcome,
    LintProblem,
    as_list,
    glob_regex,
    lint_glob,
    quote,
)
from rubrics.trajectory import Email, Trajectory
from rubrics.trajectory.sends import Sends


_ANGLE_ADDRESS = re.compile(r"<([^<>]*)>\s*$")
# An address header longer than this, or with more comments nested or in a row, is not parsed: parseaddr recurses
# once per "(" and a recipient of a thousand of them raised RecursionError, which made the item an error and let a
# penalised rollout escape its penalty. Such a recipient is kept as its text: it equals no address a rubric names,
# so it never meets `to` and always counts for `to_other_than`.
MAX_PARSED_ADDRESS = 998     # RFC 5322's line limit
MAX_COMMENTS = 16


@lru_cache(maxsize=8192)
def normalize_address(address: str) -> str:
    """"Jane Doe <Jane@Acme.test>" -> "jane@acme.test"; text without an address is kept, lower-cased."""
    if not any(c in address for c in '<(",'):
        return address.strip().lower()  # the common bare address; parseaddr is slow
    if len(address) > MAX_PARSED_ADDRESS or address.count("(") > MAX_COMMENTS:
        return address.strip().lower()
    angle = _ANGLE_ADDRESS.search(address)
    if angle and angle.group(1).strip():
        return angle.group(1).strip().lower()
    try:
        _, parsed = parseaddr(address)
    except (RecursionError, ValueError, IndexError):   # a header the standard library's parser chokes on
        parsed = ""
    return (parsed or address).strip().lower()


class EmailSentConfig(CheckConfig):
    to: str | list[str] | None = None
    cc: str | list[str] | None = None
    subject: str | None = None
    body: str | None = None
    attachment: str | None = None
    to_other_than: str | list[str] | None = None
    # the tools that send, by exact name (default: send_email, bare or behind an MCP-style server prefix)
    senders: list[str] | None = None

    @field_validator("senders")
    @classmethod
    def _senders_not_blank(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not [name for name in value if name.strip()]:
            raise ValueError("name at least one tool, or leave senders out for the default (send_email)")
        return value

    @field_validator("to", "cc", "to_other_than")
    @classmethod
    def _addresses_not_blank(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None and not [a for a in as_list(value) if a.strip()]:
            raise ValueError("give at least one address")
        return value

    @cached_property
    def to_addresses(self) -> frozenset[str]:
        return frozenset(normalize_address(a) for a in as_list(self.to))

    @cached_property
    def cc_addresses(self) -> frozenset[str]:
        return frozenset(normalize_address(a) for a in as_list(self.cc))

    @cached_property
    def allowed_addresses(self) -> frozenset[str]:
        return frozenset(normalize_address(a) for a in as_list(self.to_other_than))

    @cached_property
    def subject_glob(self) -> re.Pattern[str] | None:
        return glob_regex(self.subject) if self.subject is not None else None

    @cached_property
    def attachment_glob(self) -> re.Pattern[str] | None:
        return glob_regex(self.attachment) if self.attachment is not None else None

    def wanted(self) -> str:
        """The fields given, for evidence: "to cfo@acme.test, attachment '*MIS*'"."""
        parts = [f"{name} {', '.join(as_list(getattr(self, name)))}" for name in ("to", "cc") if getattr(self, name)]
        for name in ("subject", "attachment"):
            if getattr(self, name) is not None:
                parts.append(f"{name} {getattr(self, name)!r}")
        if self.body is not None:
            parts.append(f"body containing {quote(self.body, 40)}")
        if self.to_other_than is not None:
            parts.append(f"a recipient other than {', '.join(as_list(self.to_other_than))}")
        return ", ".join(parts) or "any email"


def _addresses(emails: list[Email], field: str) -> list[frozenset[str]]:
    return [frozenset(normalize_address(a) for a in getattr(e, field)) for e in emails]


def _mismatches(
    config: EmailSentConfig, email: Email, index: int, addresses: dict[str, list[frozenset[str]]]
) -> list[str]:
    """The fields of `config` that `email` fails, as short phrases."""
    problems = []
    for field, wanted in (("to", config.to_addresses), ("cc", config.cc_addresses)):
        missing = sorted(wanted - addresses[field][index])
        if missing:
            problems.append(f"{', '.join(missing)} not in {field}")
    if config.subject_glob is not None and not config.subject_glob.match(email.subject):
        problems.append(f"subject {quote(email.subject, 40)} does not match {config.subject!r}")
    if config.body is not None and config.body.casefold() not in email.body.casefold():
        problems.append(f"body lacks {quote(config.body, 40)}")
    if config.attachment_glob is not None and not any(config.attachment_glob.match(a.name) for a in email.attachments):
        names = ", ".join(a.name for a in email.attachments) or "none"
        problems.append(f"no attachment matches {config.attachment!r} (attachments: {names})")
    if config.to_other_than is not None:
        everyone = addresses["to"][index] | addresses["cc"][index] | addresses["bcc"][index]
        if not everyone - config.allowed_addresses:
            problems.append("no recipient outside the list")
    return problems


def _summary(email: Email) -> str:
    recipients = ", ".join(email.recipients()) or "nobody"
    return f"to {recipients}, subject {quote(email.subject, 40)}"


def _why_none(found: Sends, config: EmailSentConfig) -> str:
    if found.from_outbox:
        return "state.outbox is empty"
    tools = ", ".join(config.senders) if config.senders else "send_email"
    if found.failed:
        return f"no {tools} call counted{_not_counted(found)}"
    return f"no state.outbox and no {tools} tool calls"


def _not_counted(found: Sends) -> str:
    """The send calls whose result reported a failure, for evidence: a reader sees why they did not count."""
    if not found.failed:
        return ""
    shown = "; ".join(f"{failed.origin}: {failed.reason}" for failed in found.failed[:3])
    more = f"; and {len(found.failed) - 3} more" if len(found.failed) > 3 else ""
    return f" (not counted, the send failed: {shown}{more})"


class EmailSentCheck:
    key = "email_sent"
    config_model = EmailSentConfig

    def run(self, config: EmailSentConfig, trajectory: Trajectory) -> CheckOutcome:
        found = trajectory.sends(config.senders)
        emails = found.emails
        if not emails:
            return CheckOutcome(False, f"no email sent ({_why_none(found, config)}); wanted {config.wanted()}")
        addresses = trajectory.cached(
            f"email_addresses:{config.senders}", lambda: {f: _addresses(emails, f) for f in ("to", "cc", "bcc")}
        )
        failures = []
        for index, send in enumerate(found.sent):
            email = send.email
            problems = _mismatches(config, email, index, addresses)
            if not problems:
                return CheckOutcome(True, f"email #{index + 1} ({send.origin}) {_summary(email)} matches "
                                          f"{config.wanted()}{_not_counted(found)}")
            failures.append(f"#{index + 1} ({send.origin}) {_summary(email)}: {'; '.join(problems)}")
        shown = " | ".join(failures[:3]) + (f" | and {len(failures) - 3} more" if len(failures) > 3 else "")
        return CheckOutcome(False, f"no sent email has {config.wanted()}; {len(emails)} sent: {shown}"
                                   f"{_not_counted(found)}")

    def lint(self, config: EmailSentConfig) -> list[LintProblem]:
        problems = lint_glob("subject", config.subject) + lint_glob("attachment", config.attachment)
        for field in ("to", "cc", "to_other_than"):
            for address in as_list(getattr(config, field)):
                if "@" not in normalize_address(address):
                    message = f"{field}: {address!r} does not look like an email address"
                    problems.append((WARNING, "not-an-address", message))
        if not config.model_fields_set:
            problems.append((WARNING, "empty-check", "email_sent: no field given; met by any sent email"))
        return problems


EMAIL_SENT = EmailSentCheck()
