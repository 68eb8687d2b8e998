"""An item judged part by part (`judge: {text: ..., parts: [...]}`): the parts' verdicts make the item's.

The item is met when every part is met: unmet as soon as one part is judged unmet (whatever the others say, an
error included), an error when no part is unmet but one could not be judged, met otherwise. Its probability is
the lowest part's (of the parts judged), so it reaches the item's threshold exactly when every part does (each part
is judged at that threshold). The rationale names each part's verdict.
"""
from __future__ import annotations

from collections.abc import Sequence

from rubrics.judges.protocol import JudgeItem, Verdict
from rubrics.judges.usage import total_usage


def combined_parts(parts: Sequence[JudgeItem], verdicts: Sequence[Verdict]) -> Verdict:
    usages = [v.usage for v in verdicts if v.usage is not None]
    usage = total_usage(usages) if usages else None
    rationale = "; ".join(f"part {number} ({_said(v)}): {part.criterion}"
                          for number, (part, v) in enumerate(zip(parts, verdicts, strict=True), start=1))
    unmet = [v for v in verdicts if v.error is None and v.met is False]
    failed = [(number, v) for number, v in enumerate(verdicts, start=1) if v.error is not None or v.met is None]
    if unmet:
        return Verdict(met=False, probability=_lowest(unmet), rationale=rationale, usage=usage)
    if failed:
        number, verdict = failed[0]
        return Verdict(met=None, probability=None, rationale=rationale, usage=usage,
                       error=f"part {number}: {verdict.error or 'the judge returned no verdict'}")
    return Verdict(met=True, probability=_lowest(verdicts), rationale=rationale, usage=usage)


def _lowest(verdicts: Sequence[Verdict]) -> float | None:
    known = [v.probability for v in verdicts if v.error is None and v.probability is not None]
    return min(known) if known else None


def _said(verdict: Verdict) -> str:
    if verdict.error is not None or verdict.met is None:
        return "error"
    shown = "met" if verdict.met else "unmet"
    return f"{shown}, {verdict.probability:.3f}" if verdict.probability is not None else shown
