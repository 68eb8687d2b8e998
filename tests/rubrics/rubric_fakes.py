"""Shared test helpers of the rubric-core tests: a scriptable judge and small rubric/trajectory builders."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Callable, Sequence

from rubrics.judges.protocol import JudgeRequest, Verdict

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "examples" / "cfo-mis"
EXAMPLE_RUBRIC = EXAMPLE_DIR / "rubric.yaml"


class ScriptedJudge:
    """Answers each request with decide(request) -> Verdict; records every call."""

    name = "scripted"

    def __init__(self, decide: Callable[[JudgeRequest], Verdict] | None = None):
        self.decide = decide or (lambda request: Verdict(met=True, probability=0.9))
        self.calls: list[list[JudgeRequest]] = []

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        self.calls.append(list(requests))
        return [self.decide(request) for request in requests]


def always(met: bool | None, error: str | None = None) -> ScriptedJudge:
    return ScriptedJudge(lambda r: Verdict(met=met, probability=None if met is None else float(met), error=error))


def yaml_text(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def trajectory(final: str = "", outbox=None, **extra) -> dict:
    data = {"id": extra.pop("id", "t1"), "messages": [{"role": "user", "content": "do it"}],
            "final_answer": final, "state": {"outbox": outbox or []}}
    data.update(extra)
    return data
