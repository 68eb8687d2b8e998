"""A verdict head: logistic regression on the frozen judge model's hidden state at the answer position of the
choice prompt, with the choice method's raw score as one more feature. `rubric judge-train` fits one
(rubrics/judge_eval/head_training.py); the `head` method (rubrics/judges/methods/head.py) judges with it.

The file (JSON, format 1) records what the head was fitted on and is refused for anything else, as a
calibration file is: another model (name, weights, quantization), another prompt layout.

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
from typing import Any

from rubrics.judges.calibration_file import ModelIdentity, read_judge_file, write_json_whole
from rubrics.judges.prompt.prompts import PROMPT_LAYOUT_VERSION

FORMAT = 1
FEATURES = "hidden+choice"
FIELDS = ("format", "judge_model", "prompt_layout", "layer", "features", "training_domains", "labels",
          "weight_decay", "mean", "scale", "weights", "bias")


class HeadFileError(ValueError):
    """A head file that cannot be read, or that was trained for another judge; the message names the file and the
    field."""


@dataclass(frozen=True)
class HeadProbe:
    """The layers whose hidden states a judge reads at the answer position, without a head (training)."""
    layers: tuple[int, ...]


@dataclass(frozen=True)
class VerdictHead:
    judge_model: ModelIdentity
    layer: int
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    training_domains: tuple[str, ...] = ()
    labels: int = 0
    weight_decay: float = 0.0
    prompt_layout: str = PROMPT_LAYOUT_VERSION
    path: str = field(default="<head>", compare=False)

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

    def check(self, model: ModelIdentity | None, *, prompt_layout: str = PROMPT_LAYOUT_VERSION) -> None:
        """Refuse the head (HeadFileError) unless it was trained for this model and prompt layout."""
        mismatch = model.mismatch(self.judge_model, "train it") if model is not None else None
        if mismatch is not None:
            self._refuse(*mismatch)
        if prompt_layout != self.prompt_layout:
            self._refuse("prompt_layout", prompt_layout, self.prompt_layout,
                         "another prompt layout (train it again with `rubric judge-train`)")

    def _refuse(self, name: str, expected: str | None, found: str | None, what: str) -> None:
        raise HeadFileError(f"{self.path}: {name}: expected {expected!r} (the judge's), found {found!r}; this head "
                            f"was trained for {what}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "judge_model": self.judge_model.to_dict(), "prompt_layout": self.prompt_layout,
                "layer": self.layer, "features": FEATURES, "training_domains": list(self.training_domains),
                "labels": self.labels, "weight_decay": self.weight_decay, "mean": list(self.mean),
                "scale": list(self.scale), "weights": list(self.weights), "bias": self.bias}

    def write(self, path: str | Path) -> None:
        write_json_whole(path, self.to_dict(), indent=1)


def load_head(path: str | Path) -> VerdictHead:
    where = str(path)
    try:
        data = json.loads(read_judge_file(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise HeadFileError(f"{where}: cannot read the head file: {exc}") from None
    except json.JSONDecodeError as exc:
        raise HeadFileError(f"{where}: not JSON: {exc}") from None
    return head_from_dict(data, where)


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
    def bad(name: str, expected: str, found: Any) -> HeadFileError:
        shown = found if not isinstance(found, list) or len(found) < 8 else f"a list of {len(found)}"
        return HeadFileError(f"{where}: {name}: expected {expected}, found {shown!r}")

    def number(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad(name, "a finite number", value)
        return float(value)

    if not isinstance(data, dict):
        raise bad("(top level)", "an object", type(data).__name__)
    unknown = sorted(set(data) - set(FIELDS))
    missing = [name for name in FIELDS if name not in data]
    if unknown or missing:
        raise bad(unknown[0] if unknown else missing[0], f"the fields {', '.join(FIELDS)}",
                  "an unknown field" if unknown else "nothing")
    if data["format"] != FORMAT or isinstance(data["format"], bool):
        raise bad("format", str(FORMAT), data["format"])
    if data["features"] != FEATURES:
        raise bad("features", repr(FEATURES), data["features"])
    model = data["judge_model"]
    if not isinstance(model, dict) or set(model) - {"name", "weights_sha256", "quantization"} \
            or not isinstance(model.get("name"), str) or not model["name"]:
        raise bad("judge_model", "an object {name, weights_sha256, quantization}", model)
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
    if not isinstance(data["prompt_layout"], str) or not data["prompt_layout"]:
        raise bad("prompt_layout", "the prompt-layout version (a string)", data["prompt_layout"])
    identity = ModelIdentity(model["name"], model.get("weights_sha256"), model.get("quantization"))
    return VerdictHead(identity, layer, vectors["mean"], vectors["scale"], vectors["weights"],
                       number("bias", data["bias"]), tuple(domains), labels,
                       number("weight_decay", data["weight_decay"]), data["prompt_layout"], where)
