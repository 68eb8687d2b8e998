"""Panel members named as text (`--panel-member`, a rubric's `judge: {panel: {members: [...]}}`), and the panel
they make.

    embedded             the embedded judge, with each item's method (or the default)
    embedded:METHOD      the embedded judge with METHOD on every item (a name in rubrics.judges.methods)
    openai:URL:MODEL     MODEL on the OpenAI-compatible server at URL (its path may not contain ':'); MODEL may be
                         left out when the server serves exactly one

Every embedded member shares one EmbeddedJudge, so the panel's embedded members are one engine batch.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubrics.judges.methods import METHOD_NAMES
from rubrics.judges.panel.judge import PanelJudge, PanelMember

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


def build_panel(specs: Sequence[MemberSpec], combine: str = "mean_logit", *, embedded_model: str | None = None,
                calibration: Any = None, cache: Any = None) -> PanelJudge:
    """The panel of these members. embedded_model and calibration (a calibration file) go to the embedded judge;
    cache (a VerdictCache) keeps every member's verdicts."""
    from rubrics.judges.extras import import_judge_class, make_embedded_judge

    embedded = None
    members = []
    for spec in specs:
        if spec.kind == "embedded":
            if embedded is None:
                options = {"model": embedded_model} if embedded_model else {}
                embedded = _cached(make_embedded_judge(**options, **({"calibration": calibration}
                                                                     if calibration is not None else {})), cache)
            members.append(PanelMember(embedded, spec.method, label=spec.text))
        else:
            judge = import_judge_class("openai", "OpenAIJudge")(base_url=spec.base_url, model=spec.model)
            members.append(PanelMember(_cached(judge, cache), label=spec.text))
    return PanelJudge(members, combine)  # type: ignore[arg-type]


def _cached(judge: Any, cache: Any) -> Any:
    if cache is None:
        return judge
    from rubrics.judges.cached import CachedJudge

    return CachedJudge(judge, cache)
