"""A verdict head: logistic regression on the frozen judge model's hidden state at the answer position of the
choice prompt, with the choice method's raw score as one more feature. `rubric judge-train` fits one
(rubrics/trust/head_training.py); the `head` method (rubrics/judges/methods/head.py) judges with it.

The file (JSON, format 1) is a fitted file (rubrics/judges/fitted/fitted_file.py): its header records what the head was
fitted on, and it is refused for anything else, as a calibration file is: another model (name, weights,
quantization), or the head method's prompts changed since (`prompt_layout`: the head method's layout version).

    {"format": 1, "judge_model": {"name": ..., "weights_sha256": ...}, "prompt_layout": "2026-11-30.1",
     "layer": 21, "features": "hidden+choice", "training_domains": [...], "labels": 1840,
     "weight_decay": 0.1, "mean": [...], "scale": [...], "weights": [...], "bias": -0.2}

The logit is sum_i weights[i] * (x[i] - mean[i]) / scale[i] + bias over x = (hidden state..., choice raw score).
Floats are written with Python's repr, so a file read back gives the same head bit for bit.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rubrics.judges.fitted.fitted_file import FieldErrors, FittedFile, FittedFileError, ModelIdentity, read_header

FORMAT = 1
FEATURES = "hidden+choice"
OWN_FIELDS = ("layer", "features", "training_domains", "labels", "weight_decay", "mean", "scale", "weights", "bias")
FIELDS = ("format", "judge_model", "prompt_layout", *OWN_FIELDS)
# the method whose prompts a head reads the hidden states of (its layout version is the file's)
HEAD_METHOD = "head"


class HeadFileError(FittedFileError):
    """A head file that cannot be read, or that was trained for another judge; the message names the file and the
    field."""


@dataclass(frozen=True)
class HeadProbe:
    """The layers whose hidden states a judge reads at the answer position, without a head (training)."""
    layers: tuple[int, ...]


@dataclass(frozen=True)
class VerdictHead(FittedFile):
    judge_model: ModelIdentity
    layer: int
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    training_domains: tuple[str, ...] = ()
    labels: int = 0
    weight_decay: float = 0.0
    # None: the head method's current layout version (a head just trained); read from a file: as it records it
    prompt_layout: str | None = None
    path: str = field(default="<head>", compare=False)

    error: ClassVar[type[FittedFileError]] = HeadFileError
    noun: ClassVar[str] = "head"
    fitted: ClassVar[str] = "trained"
    redo: ClassVar[str] = "train it"
    redo_layout: ClassVar[str] = "train it again with `rubric judge-train`"
    json_indent: ClassVar[int] = 1
    own_fields: ClassVar[tuple[str, ...]] = OWN_FIELDS

    def covers(self) -> tuple[str, ...]:
        return (HEAD_METHOD,)

    @property
    def layers(self) -> tuple[int, ...]:
        return (self.layer,)

    @property
    def hidden_size(self) -> int:
        return len(self.weights) - 1

    def logit(self, hidden: Any, choice_raw: float) -> float:
        """hidden: the layer's state at the answer position (a sequence or tensor of hidden_size floats)."""
        values = [float(v) for v in hidden]
        if len(values) != self.hidden_size:
            raise HeadFileError(f"{self.path}: weights: the head reads {self.hidden_size} hidden features, the "
                                f"model gave {len(values)}")
        values.append(float(choice_raw))
        return math.fsum(w * (x - m) / s for w, x, m, s in zip(self.weights, values, self.mean, self.scale)) \
            + self.bias

    @property
    def digest(self) -> str:
        """sha256 of the head's content (the verdict-cache key of its verdicts)."""
        import hashlib

        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def body(self) -> dict[str, Any]:
        return {"layer": self.layer, "features": FEATURES, "training_domains": list(self.training_domains),
                "labels": self.labels, "weight_decay": self.weight_decay, "mean": list(self.mean),
                "scale": list(self.scale), "weights": list(self.weights), "bias": self.bias}

    @classmethod
    def from_dict(cls, data: Any, where: str = "<head>") -> "VerdictHead":
        return head_from_dict(data, where)


def load_head(path: str | Path) -> VerdictHead:
    return VerdictHead.load(path)


def as_head(head: str | Path | VerdictHead) -> VerdictHead:
    if isinstance(head, VerdictHead):
        return head
    if isinstance(head, str | os.PathLike):
        return load_head(head)
    raise TypeError(f"head: expected a path or a VerdictHead, got {type(head).__name__}")


def judge_head(head: Any, model: ModelIdentity | None) -> VerdictHead | HeadProbe | None:
    """What a judge constructor does with head=: None, a probe as given, or the head loaded and checked against the
    judge's model."""
    if head is None or isinstance(head, HeadProbe):
        return head
    loaded = as_head(head)
    loaded.check(model)
    return loaded


def head_from_dict(data: Any, where: str = "<head>") -> VerdictHead:
    errors = FieldErrors(HeadFileError, where)
    bad = errors.bad

    def number(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad(name, "a finite number", value)
        return float(value)

    header = read_header(data, OWN_FIELDS, errors)
    if not isinstance(header.prompt_layout, str):   # a head covers one method: its version is one string
        raise bad("prompt_layout", "the prompt-layout version (a string)", header.prompt_layout)
    if data["features"] != FEATURES:
        raise bad("features", repr(FEATURES), data["features"])
    layer = data["layer"]
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise bad("layer", "a layer index (an integer, 0 or more)", layer)
    vectors = {}
    for name in ("mean", "scale", "weights"):
        values = data[name]
        if not isinstance(values, list) or len(values) < 2:
            raise bad(name, "a list of numbers (the hidden size plus one)", values)
        vectors[name] = tuple(number(f"{name}[{i}]", v) for i, v in enumerate(values))
    if not len(vectors["mean"]) == len(vectors["scale"]) == len(vectors["weights"]):
        raise bad("scale", f"as many numbers as mean ({len(vectors['mean'])})", data["scale"])
    if any(s <= 0 for s in vectors["scale"]):
        raise bad("scale", "positive numbers", next(s for s in vectors["scale"] if s <= 0))
    domains = data["training_domains"]
    if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
        raise bad("training_domains", "a list of domain names", domains)
    labels = data["labels"]
    if isinstance(labels, bool) or not isinstance(labels, int) or labels < 0:
        raise bad("labels", "the number of labels it was trained on", labels)
    return VerdictHead(header.judge_model, layer, vectors["mean"], vectors["scale"], vectors["weights"],
                       number("bias", data["bias"]), tuple(domains), labels,
                       number("weight_decay", data["weight_decay"]), header.prompt_layout, where)
