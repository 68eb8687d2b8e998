"""Calibration files: a fitted calibration together with the identity of the judge that produced the raw scores.

`rubric judge-eval LABELS... --method M --fit-calibration --write calibration.json` writes one;
`rubric grade --calibration calibration.json`, `EmbeddedJudge(calibration=...)`, `OpenAIJudge(calibration=...)` and
`judge: {calibration: path}` in a rubric read it. The format (JSON, version 1):

    {"format": 1,
     "judge_model": {"name": "SmolLM2-135M-Instruct", "weights_sha256": "b179c9..."},
     "prompt_layout": "2026-11-30.1",
     "calibrations": {"statement": {"scale": 1.23, "offset": -0.45}}}

A calibration maps a method's raw score to a probability, and the raw score depends on the model and on the exact
prompts, so a file is refused (CalibrationFileError, naming the file, the field, what the judge expected and what
the file holds) when it was made for another model (`judge_model.name`; `judge_model.weights_sha256` when both the
file and the judge know it: an OpenAI-compatible server does not say, so its files record null) or another prompt
layout (`prompt_layout`, rubrics.judges.prompt.prompts.PROMPT_LAYOUT_VERSION). `calibrations` holds one entry per method;
a method without an entry keeps its built-in calibration, and a judge asked for a method the file has no entry
for (its `method=`, or every method a rubric's judge items use in `rubric grade`) refuses the file.
This module needs nothing beyond the standard library.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# what an embedded judge's linear maps may compute in besides floating point (judge_engine's EngineConfig
# .quantization; repeated here so that the CLI's --help needs no engine): int8 weights and activations (W8A8), or
# int8 weights times float activations (W8A32). Each has its own calibration, since its raw scores differ a little.
QUANTIZATIONS = ("int8", "int8-weights")

from rubrics.judges.methods import METHOD_NAMES, Calibration
from rubrics.judges.prompt.prompts import PROMPT_LAYOUT_VERSION

FORMAT = 1
FIELDS = ("format", "judge_model", "prompt_layout", "calibrations")


class CalibrationFileError(ValueError):
    """A calibration file that cannot be read, or that was made for another judge; the message names the file
    and the field."""


@dataclass(frozen=True)
class ModelIdentity:
    """The judge model: its name, the sha256 of the weights it runs (None when the judge cannot know it), and how
    its linear maps compute (None: in floating point; "int8": quantized, whose raw scores differ a little)."""
    name: str
    weights_sha256: str | None = None
    quantization: str | None = None

    def to_dict(self) -> dict[str, Any]:
        identity = {"name": self.name, "weights_sha256": self.weights_sha256}
        return {**identity, "quantization": self.quantization} if self.quantization else identity

    def mismatch(self, recorded: "ModelIdentity", redo: str = "refit it") -> tuple[str, Any, Any, str] | None:
        """How a file recorded for `recorded` does not fit this judge's model: (field, expected, found, what the
        file was made for), or None when it fits. Weights are compared only when both sides know them (a served
        model does not say)."""
        if self.name != recorded.name:
            return "judge_model.name", self.name, recorded.name, "another model"
        if self.weights_sha256 and recorded.weights_sha256 and self.weights_sha256 != recorded.weights_sha256:
            return "judge_model.weights_sha256", self.weights_sha256, recorded.weights_sha256, \
                "other weights of the model"
        if self.quantization != recorded.quantization:
            return "judge_model.quantization", self.quantization, recorded.quantization, \
                f"the model computing another way ({redo} with the judge's --quantization)"
        return None


@dataclass(frozen=True)
class CalibrationFile:
    judge_model: ModelIdentity
    calibrations: Mapping[str, Calibration]
    prompt_layout: str = PROMPT_LAYOUT_VERSION
    path: str = field(default="<calibration>", compare=False)   # where it was read from, for messages

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "judge_model": self.judge_model.to_dict(), "prompt_layout": self.prompt_layout,
                "calibrations": {name: {"scale": c.scale, "offset": c.offset}
                                 for name, c in sorted(self.calibrations.items())}}

    def write(self, path: str | Path) -> None:
        write_json_whole(path, self.to_dict(), indent=2)

    def check(self, model: ModelIdentity | None, *, prompt_layout: str = PROMPT_LAYOUT_VERSION,
              method: str | None = None) -> None:
        """Refuse the file (CalibrationFileError) unless it was made for this model, this prompt layout and, when
        given, this method. model None: the model is not known yet (checked later)."""
        mismatch = model.mismatch(self.judge_model) if model is not None else None
        if mismatch is not None:
            self._refuse(*mismatch)
        if prompt_layout != self.prompt_layout:
            self._refuse("prompt_layout", prompt_layout, self.prompt_layout,
                         "another prompt layout (refit it with `rubric judge-eval --fit-calibration --write`)")
        if method is not None:
            self.check_methods([method])

    def check_methods(self, methods: Iterable[str]) -> None:
        """Refuse the file when it has an entry for none of these methods (those the judge will use)."""
        wanted = sorted(set(methods))
        if wanted and not set(wanted) & set(self.calibrations):
            raise CalibrationFileError(
                f"{self.path}: calibrations: expected an entry for {' or '.join(map(repr, wanted))} (the method the "
                f"judge uses), found {', '.join(map(repr, sorted(self.calibrations))) or 'none'}; this calibration "
                "was fitted for another method")

    def _refuse(self, name: str, expected: str, found: str | None, what: str) -> None:
        raise CalibrationFileError(f"{self.path}: {name}: expected {expected!r} (the judge's), found {found!r}; "
                                   f"this calibration was fitted for {what}")


def write_json_whole(path: str | Path, data: Any, *, indent: int) -> None:
    """A judge file written whole or not at all (a temporary file beside it, renamed over the target)."""
    path = Path(path)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staging.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")
    os.replace(staging, path)


def read_judge_file(path: str | Path) -> str:
    """The text of a calibration or head file: a regular file of at most MAX_JUDGE_FILE_BYTES, UTF-8 (OSError or
    UnicodeDecodeError otherwise: a FIFO, /dev/zero or a huge file is refused before it is read)."""
    from rubrics.input_files import MAX_JUDGE_FILE_BYTES, read_input_file

    return read_input_file(path, MAX_JUDGE_FILE_BYTES).decode("utf-8")


def load_calibration_file(path: str | Path) -> CalibrationFile:
    """Read and validate a calibration file; CalibrationFileError names the path and the field."""
    where = str(path)
    try:
        text = read_judge_file(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationFileError(f"{where}: cannot read the calibration file: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrationFileError(f"{where}: not JSON: {exc}") from None
    return calibration_from_dict(data, where)


def calibration_from_dict(data: Any, where: str = "<calibration>") -> CalibrationFile:
    def bad(name: str, expected: str, found: Any) -> CalibrationFileError:
        return CalibrationFileError(f"{where}: {name}: expected {expected}, found {found!r}")

    if not isinstance(data, dict):
        raise bad("(top level)", "an object", type(data).__name__)
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise bad(unknown[0], f"only the fields {', '.join(FIELDS)}", unknown[0])
    if data.get("format") != FORMAT or isinstance(data.get("format"), bool):
        raise bad("format", str(FORMAT), data.get("format"))
    model = data.get("judge_model")
    if not isinstance(model, dict) or set(model) - {"name", "weights_sha256", "quantization"}:
        raise bad("judge_model", "an object {name, weights_sha256, quantization}", model)
    quantization = model.get("quantization")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise bad("judge_model.quantization", f"null or one of {', '.join(map(json.dumps, QUANTIZATIONS))}",
                  quantization)
    if not isinstance(model.get("name"), str) or not model["name"]:
        raise bad("judge_model.name", "the model's name (a non-empty string)", model.get("name"))
    sha = model.get("weights_sha256")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                and all(c in "0123456789abcdef" for c in sha)):
        raise bad("judge_model.weights_sha256", "64 lower-case hex digits or null", sha)
    layout = data.get("prompt_layout")
    if not isinstance(layout, str) or not layout:
        raise bad("prompt_layout", "the prompt-layout version (a string)", layout)
    entries = data.get("calibrations")
    if not isinstance(entries, dict) or not entries:
        raise bad("calibrations", "an object {method: {scale, offset}} with at least one method", entries)
    calibrations = {}
    for method, entry in entries.items():
        if method not in METHOD_NAMES:
            raise bad(f"calibrations.{method}", f"a method name ({', '.join(METHOD_NAMES)})", method)
        if not isinstance(entry, dict) or set(entry) != {"scale", "offset"}:
            raise bad(f"calibrations.{method}", "an object {scale, offset}", entry)
        for name in ("scale", "offset"):
            value = entry[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise bad(f"calibrations.{method}.{name}", "a finite number", value)
        # probability = sigmoid(scale * raw + offset). A scale <= 0 makes the probability ignore the judge's score
        # (0) or reward the wrong answer (< 0); an offset far from 0, or one far from 0 relative to the scale,
        # puts the 50 % point where no raw score reaches it, so every item is met (or none is) whatever the
        # judge said. Real fits of the built-in methods have scales 0.08-0.8 and offsets within +-0.5.
        min_scale, max_scale, max_offset, max_midpoint = 1e-3, 1e3, 20.0, 200.0
        scale, offset = float(entry["scale"]), float(entry["offset"])
        if not min_scale <= scale <= max_scale:
            raise bad(f"calibrations.{method}.scale", f"a positive scale between {min_scale:g} and {max_scale:g} "
                      "(probability = sigmoid(scale * raw score + offset); a scale of 0 or below ignores or inverts "
                      "the judge's score)", entry["scale"])
        if abs(offset) > max_offset:
            raise bad(f"calibrations.{method}.offset", f"an offset between {-max_offset:g} and {max_offset:g} (a "
                      "larger one decides the verdict whatever the judge's score)", entry["offset"])
        if abs(offset) / scale > max_midpoint:
            raise bad(f"calibrations.{method}.offset", f"an offset with |offset / scale| at most {max_midpoint:g} "
                      f"(with scale {scale:g}, the 50 % point would be at raw score {-offset / scale:g}, which no "
                      "judge score reaches: the verdict would be the same whatever the judge said)", entry["offset"])
        calibrations[method] = Calibration(scale, offset)
    return CalibrationFile(ModelIdentity(model["name"], sha, quantization), calibrations, layout, where)


def as_calibration_file(calibration: str | Path | CalibrationFile | Mapping) -> CalibrationFile:
    """A path, a loaded CalibrationFile, or the file's content as a dict."""
    if isinstance(calibration, CalibrationFile):
        return calibration
    if isinstance(calibration, Mapping):
        return calibration_from_dict(dict(calibration))
    if isinstance(calibration, str | os.PathLike):
        return load_calibration_file(calibration)
    raise TypeError(f"calibration: expected a path or a CalibrationFile, got {type(calibration).__name__}")


def rubric_calibration_path(rubric: Any) -> Path | None:
    """The path in the rubric's `judge: {calibration: PATH}`, relative to the rubric file (to the working directory
    for a rubric not read from a file); None when it names none."""
    return rubric_file_path(rubric, getattr(getattr(rubric, "judge", None), "calibration", None))


def rubric_file_path(rubric: Any, name: str | None) -> Path | None:
    """A file the rubric names (its `judge:` calibration or head), relative to the rubric file (to the working
    directory for a rubric not read from a file); None for no name."""
    if not name:
        return None
    path = Path(name).expanduser()
    source = getattr(rubric, "source", "")
    if not path.is_absolute() and source and not source.startswith("<"):
        path = Path(source).parent / path
    return path


def judge_calibrations(calibration: Any, calibrations: Mapping[str, Calibration] | None,
                       model: ModelIdentity | None, method: str | None) -> tuple[CalibrationFile | None, dict]:
    """What a judge constructor does with calibration= and calibrations=: the checked file and the per-method
    calibrations, explicit `calibrations` entries over the file's."""
    if calibration is None:
        return None, dict(calibrations or {})
    loaded = as_calibration_file(calibration)
    loaded.check(model, method=method)
    return loaded, {**loaded.calibrations, **(calibrations or {})}
