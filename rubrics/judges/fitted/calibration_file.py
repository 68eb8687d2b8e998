"""Calibration files: a fitted calibration together with the identity of the judge that produced the raw scores.

`rubric judge-eval LABELS... --method M --fit-calibration --write calibration.json` writes one;
`rubric grade --calibration calibration.json`, `EmbeddedJudge(calibration=...)`, `OpenAIJudge(calibration=...)` and
`judge: {calibration: path}` in a rubric read it. The format (JSON, version 1) is a fitted file's header
(rubrics/judges/fitted/fitted_file.py) and the calibrations:

    {"format": 1,
     "judge_model": {"name": "SmolLM2-135M-Instruct", "weights_sha256": "b179c9..."},
     "prompt_layout": "2026-11-30.1",
     "calibrations": {"statement": {"scale": 1.23, "offset": -0.45}}}

A calibration maps a method's raw score to a probability, and the raw score depends on the model and on the exact
prompts, so a file is refused (CalibrationFileError, naming the file, the field, what the judge expected and what
the file holds) when it was made for another model (`judge_model.name`; `judge_model.weights_sha256` when both the
file and the judge know it: an OpenAI-compatible server does not say, so its files record null) or when a method it
has an entry for has changed its prompts since (`prompt_layout`: the version of each such method,
JudgeMethod.layout_version; one string when they are all the same). `calibrations` holds one entry per method; a
method without an entry keeps its built-in calibration, and a judge asked for a method the file has no entry for
(its `method=`, or every method a rubric's judge items use in `rubric grade`) refuses the file.
This module needs nothing beyond the standard library.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

# ModelIdentity, QUANTIZATIONS and the file helpers live with the fitted files; imported from here by older code.
from rubrics.judges.fitted.fitted_file import QUANTIZATIONS, FieldErrors, FittedFile, FittedFileError, ModelIdentity, \
    check_layout_covers, read_header, read_judge_file, write_json_whole
from rubrics.judges.methods import METHOD_CLASSES, Calibration

__all__ = ["QUANTIZATIONS", "ModelIdentity", "CalibrationFile", "CalibrationFileError", "load_calibration_file",
           "calibration_from_dict", "as_calibration_file", "judge_calibrations", "rubric_calibration_path",
           "rubric_file_path", "read_judge_file", "write_json_whole"]

FORMAT = 1
FIELDS = ("format", "judge_model", "prompt_layout", "calibrations")


class CalibrationFileError(FittedFileError):
    """A calibration file that cannot be read, or that was made for another judge; the message names the file
    and the field."""


@dataclass(frozen=True)
class CalibrationFile(FittedFile):
    judge_model: ModelIdentity
    calibrations: Mapping[str, Calibration]
    # None: each method's current layout version (a fit just made); read from a file: as it records them
    prompt_layout: str | Mapping[str, str] | None = None
    path: str = field(default="<calibration>", compare=False)   # where it was read from, for messages

    error: ClassVar[type[FittedFileError]] = CalibrationFileError
    noun: ClassVar[str] = "calibration"
    fitted: ClassVar[str] = "fitted"
    redo: ClassVar[str] = "refit it"
    redo_layout: ClassVar[str] = "refit it with `rubric judge-eval --fit-calibration --write`"
    json_indent: ClassVar[int] = 2
    own_fields: ClassVar[tuple[str, ...]] = ("calibrations",)

    def covers(self) -> tuple[str, ...]:
        return tuple(sorted(self.calibrations))

    def body(self) -> dict[str, Any]:
        return {"calibrations": {name: {"scale": c.scale, "offset": c.offset}
                                 for name, c in sorted(self.calibrations.items())}}

    def check(self, model: ModelIdentity | None, *, method: str | None = None) -> None:
        """Refuse the file (CalibrationFileError) unless it was made for this model and its methods' prompts as
        they are now and, when given, has an entry for this method. model None: the model is not known yet
        (checked later)."""
        super().check(model)
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

    @classmethod
    def from_dict(cls, data: Any, where: str = "<calibration>") -> "CalibrationFile":
        return calibration_from_dict(data, where)


def load_calibration_file(path: str | Path) -> CalibrationFile:
    """Read and validate a calibration file; CalibrationFileError names the path and the field."""
    return CalibrationFile.load(path)


# probability = sigmoid(scale * raw + offset). A scale <= 0 makes the probability ignore the judge's score (0) or
# reward the wrong answer (< 0); an offset far from 0, or one far from 0 relative to the scale, puts the 50 % point
# where no raw score reaches it, so every item is met (or none is) whatever the judge said. Real fits of the
# built-in methods have scales 0.08-0.8 and offsets within +-0.5.
MIN_SCALE, MAX_SCALE, MAX_OFFSET, MAX_MIDPOINT = 1e-3, 1e3, 20.0, 200.0


def calibration_from_dict(data: Any, where: str = "<calibration>") -> CalibrationFile:
    errors = FieldErrors(CalibrationFileError, where)
    header = read_header(data, CalibrationFile.own_fields, errors, required=())
    entries = data.get("calibrations")
    if not isinstance(entries, dict) or not entries:
        raise errors.bad("calibrations", "an object {method: {scale, offset}} with at least one method", entries)
    calibrations = {method: read_calibration(method, entry, errors) for method, entry in entries.items()}
    check_layout_covers(header.prompt_layout, calibrations, errors)
    return CalibrationFile(header.judge_model, calibrations, header.prompt_layout, where)


def read_calibration(method: Any, entry: Any, errors: FieldErrors) -> Calibration:
    bad = errors.bad
    if method not in METHOD_CLASSES:   # the registry as it is now: a method a user registered counts
        raise bad(f"calibrations.{method}", f"a method name ({', '.join(METHOD_CLASSES)})", method)
    if not isinstance(entry, dict) or set(entry) != {"scale", "offset"}:
        raise bad(f"calibrations.{method}", "an object {scale, offset}", entry)
    for name in ("scale", "offset"):
        value = entry[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad(f"calibrations.{method}.{name}", "a finite number", value)
    scale, offset = float(entry["scale"]), float(entry["offset"])
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise bad(f"calibrations.{method}.scale", f"a positive scale between {MIN_SCALE:g} and {MAX_SCALE:g} "
                  "(probability = sigmoid(scale * raw score + offset); a scale of 0 or below ignores or inverts "
                  "the judge's score)", entry["scale"])
    if abs(offset) > MAX_OFFSET:
        raise bad(f"calibrations.{method}.offset", f"an offset between {-MAX_OFFSET:g} and {MAX_OFFSET:g} (a "
                  "larger one decides the verdict whatever the judge's score)", entry["offset"])
    if abs(offset) / scale > MAX_MIDPOINT:
        raise bad(f"calibrations.{method}.offset", f"an offset with |offset / scale| at most {MAX_MIDPOINT:g} "
                  f"(with scale {scale:g}, the 50 % point would be at raw score {-offset / scale:g}, which no "
                  "judge score reaches: the verdict would be the same whatever the judge said)", entry["offset"])
    return Calibration(scale, offset)


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
