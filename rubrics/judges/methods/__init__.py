"""The judge methods, by name: one file each, one line here.

The registry feeds the rubric's `method:` field (and so its JSON Schema), `rubric judge-eval --method`, the
embedded judge and the OpenAI-compatible judge. Adding a method: write its file (a JudgeMethod subclass with its
own layout_version), add it to METHOD_CLASSES, record its prompts' fingerprint in
tests/rubrics/test_calibration_file.py, and test it. Its calibration and head files bind to its version alone, so
adding it (or changing it later) refuses no other method's files.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubrics.judges.methods.base import IDENTITY, Calibration, JudgeMethod, PromptSpec, Reasoning, ScoredPrompt
from rubrics.judges.methods.choice import ChoiceMethod
from rubrics.judges.methods.head import HeadMethod
from rubrics.judges.methods.likelihood import LikelihoodMethod
from rubrics.judges.methods.statement import StatementMethod

METHOD_CLASSES: dict[str, type[JudgeMethod]] = {cls.name: cls for cls in (
    ChoiceMethod,
    LikelihoodMethod,
    StatementMethod,
    HeadMethod,
)}
METHOD_NAMES: tuple[str, ...] = tuple(METHOD_CLASSES)
# The method for items that name none, on a judge whose model sets none (each catalog model has its own:
# rubrics/judges/fitted/judge_models.py): choice, whose raw score is a probability even uncalibrated.
DEFAULT_METHOD = ChoiceMethod.name
# The OpenAIJudge's method for items that name none (a method a chat server can run).
DEFAULT_HTTP_METHOD = ChoiceMethod.name
# Reasoned mode asks a question and scores the answer after a rationale: the choice method's form. An item in
# reasoned mode is judged by it whatever method it names.
REASONING_METHOD = ChoiceMethod.name


def make_method(name: str, calibrations: Mapping[str, Calibration] | None = None, head: Any = None) -> JudgeMethod:
    """The method called name, with calibrations {method name: Calibration} replacing built-in ones; head: the
    judge's verdict head, for the head method."""
    try:
        cls = METHOD_CLASSES[name]
    except KeyError:
        raise ValueError(f"method: expected one of {', '.join(METHOD_NAMES)}, got {name!r}") from None
    return cls.with_calibrations(calibrations or {}, head)


class JudgeMethods:
    """The methods one judge runs, each made once with that judge's calibrations {method name: Calibration} and
    verdict head."""

    def __init__(self, calibrations: Mapping[str, Calibration] | None = None, head: Any = None):
        self.calibrations = dict(calibrations or {})
        self.head = head
        self._made: dict[str, JudgeMethod] = {}

    def named(self, name: str) -> JudgeMethod:
        """ValueError for a name the registry does not know, or a method the judge lacks what it needs for."""
        if name not in self._made:
            self._made[name] = make_method(name, self.calibrations, self.head)
        return self._made[name]

    def for_item(self, item, default: str) -> JudgeMethod:
        return self.named(method_name_for(item, default))


def method_name_for(item, default: str) -> str:
    """The method that judges an item: reasoned mode's, else the item's own, else the judge's default."""
    if item.mode == "reasoned":
        return REASONING_METHOD
    return item.method or default


__all__ = ["Calibration", "IDENTITY", "JudgeMethod", "PromptSpec", "Reasoning", "ScoredPrompt", "METHOD_CLASSES",
           "METHOD_NAMES", "DEFAULT_METHOD", "DEFAULT_HTTP_METHOD", "REASONING_METHOD", "JudgeMethods", "make_method",
           "method_name_for"]
