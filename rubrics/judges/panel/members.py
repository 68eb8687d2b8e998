"""Panel members named as text (`--panel-member`, a rubric's `judge: {panel: {members: [...]}}`); the panel they
make is built by rubrics.judges.factory (JudgeSpec kind "panel").

    embedded             the embedded judge, with each item's method (or the default)
    embedded:METHOD      the embedded judge with METHOD on every item (a name in rubrics.judges.methods)
    openai:URL:MODEL     MODEL on the OpenAI-compatible server at URL (its path may not contain ':'); MODEL may be
                         left out when the server serves exactly one

Every embedded member shares one EmbeddedJudge, so the panel's embedded members are one engine batch.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rubrics.judges.methods import METHOD_NAMES

_OPENAI = re.compile(r"openai:(?P<url>https?://[^/:\s]+(?::\d+)?(?:/[^:\s]*)?)(?::(?P<model>\S+))?")
MEMBER_FORMS = "embedded, embedded:METHOD or openai:URL:MODEL"


@dataclass(frozen=True)
class MemberSpec:
    text: str
    kind: str                   # "embedded" | "openai"
    method: str | None = None
    base_url: str | None = None
    model: str | None = None


def parse_member(text: str) -> MemberSpec:
    """A member's text as a MemberSpec; ValueError saying the accepted forms otherwise."""
    if text == "embedded":
        return MemberSpec(text, "embedded")
    if text.startswith("embedded:"):
        method = text.removeprefix("embedded:")
        if method not in METHOD_NAMES:
            raise ValueError(f"panel member {text!r}: unknown method {method!r} (known: {', '.join(METHOD_NAMES)})")
        return MemberSpec(text, "embedded", method=method)
    match = _OPENAI.fullmatch(text)
    if match:
        return MemberSpec(text, "openai", base_url=match["url"], model=match["model"])
    raise ValueError(f"panel member {text!r}: expected {MEMBER_FORMS}")

