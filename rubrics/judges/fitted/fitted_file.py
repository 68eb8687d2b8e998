"""Model-bound fitted files: numbers fitted on one judge model's scores of some methods' prompts, written with what
they were fitted for, so that a judge refuses them for anything else.

A calibration file (calibration_file.py) and a verdict head (verdict_head.py) are the kinds today; a new kind
subclasses FittedFile (as a frozen dataclass with `judge_model`, `prompt_layout` and `path` fields), names its
methods (`covers`) and its own fields, and gets the same header, loader, writer and refusal. Every kind's file
opens with the same header (JSON, format 1):

    {"format": 1,
     "judge_model": {"name": "SmolLM2-135M-Instruct", "weights_sha256": "b179c9..." | null,
                     "quantization": "int8" | "int8-weights" (only when not null)},
     "prompt_layout": "2026-11-30.1",                              every method it covers at this version
                      or {"choice": "2026-11-30.1", "statement": ...}   one version per method it covers
     ...the kind's own fields}

The numbers mean something only on the model whose scores they were fitted on (name; weights when both the file
and the judge know them; quantization) and for the exact prompts of the methods they cover, so a file is refused
(the kind's error, a FittedFileError naming the file, the field, what the judge expected and what the file holds)
for another model, or once a method it covers declares another layout version (JudgeMethod.layout_version). The
versions are per method: editing one method's prompts refuses only the files that cover that method.

A file a user names is refused with an error. A file shipped with the package (rubrics/judges/fitted/calibrations/,
heads/) is loaded by load_shipped, and a refused one is the package's defect, not the user's: with
$RUBRICS_STRICT_FITTED_FILES=1 (tests/conftest.py sets it, so the test suite fails at the judge's start-up) it
raises ShippedFileError; otherwise a ShippedFileWarning names the file and why, and the judge runs without it
(uncalibrated, or without its head). This module needs nothing beyond the standard library and the method registry.
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

FORMAT = 1
HEADER_FIELDS = ("format", "judge_model", "prompt_layout")
# what an embedded judge's linear maps may compute in besides floating point (judge_engine's EngineConfig
# .quantization; repeated here so that the CLI's --help needs no engine): int8 weights and activations (W8A8), or
# int8 weights times float activations (W8A32). Each has its own fitted files, since its raw scores differ a little.
QUANTIZATIONS = ("int8", "int8-weights")
# Set (to anything but "" or "0") where a refused shipped file must stop the judge: the test suite.
STRICT_ENV = "RUBRICS_STRICT_FITTED_FILES"

F = TypeVar("F", bound="FittedFile")


class FittedFileError(ValueError):
    """A fitted file that cannot be read, or that was fitted for another judge; the message names the file and the
    field."""


class ShippedFileError(FittedFileError):
    """A file shipped with the package refused for the model it ships for, under $RUBRICS_STRICT_FITTED_FILES."""


class ShippedFileWarning(UserWarning):
    """A file shipped with the package refused for the model it ships for: the judge runs without it."""


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


def layout_version(method: str) -> str | None:
    """The prompt-layout version the method declares now; None for a method the registry does not have."""
    from rubrics.judges.methods import METHOD_CLASSES

    cls = METHOD_CLASSES.get(method)
    return None if cls is None else cls.layout_version


@dataclass(frozen=True)
class Refusal:
    """Why a fitted file does not fit a judge: the field, what the judge expected, what the file holds, and what the
    file was fitted for instead."""
    field: str
    expected: Any
    found: Any
    fitted_for: str


class FittedFile:
    """Base of every model-bound fitted file kind. A subclass is a frozen dataclass with the fields `judge_model`
    (ModelIdentity), `prompt_layout` (None when made: the current version of each method it covers) and `path`
    (where it was read from, for messages; compare=False), and says what it is in the class variables below."""

    error: ClassVar[type[FittedFileError]] = FittedFileError
    noun: ClassVar[str] = "fitted file"             # "this {noun} was {fitted} for another model"
    fitted: ClassVar[str] = "fitted"
    redo: ClassVar[str] = "refit it"                # what makes a file for the model as the judge runs it
    redo_layout: ClassVar[str] = "refit it"         # what makes a file for the methods' prompts as they are now
    json_indent: ClassVar[int] = 2
    own_fields: ClassVar[tuple[str, ...]] = ()      # the kind's fields after the header, in the file's order

    judge_model: ModelIdentity
    prompt_layout: str | Mapping[str, str] | None
    path: str

    # -- what it covers ------------------------------------------------------------------------------------
    def covers(self) -> tuple[str, ...]:
        """The methods whose prompts its numbers were fitted on."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        # Made in code (a fit just done): its methods at their current versions. Read from a file: as recorded,
        # one string when every method it covers has the same version (the form every file had before the versions
        # were per method, so those files keep loading and read back byte for byte).
        layouts = self.layouts() if self.prompt_layout is not None else self._current_layouts()
        object.__setattr__(self, "prompt_layout", compact_layouts(layouts))

    def _current_layouts(self) -> dict[str, str]:
        current = {method: layout_version(method) for method in self.covers()}
        unknown = sorted(method for method, version in current.items() if version is None)
        if unknown:
            raise self.error(f"{self.path}: expected methods of the registry, found {unknown[0]!r}")
        return current   # type: ignore[return-value]

    def layouts(self) -> dict[str, str]:
        """The prompt-layout version it records for each method it covers."""
        if isinstance(self.prompt_layout, str):
            return {method: self.prompt_layout for method in self.covers()}
        return dict(self.prompt_layout or {})

    # -- refusal -------------------------------------------------------------------------------------------
    def refusal(self, model: ModelIdentity | None) -> Refusal | None:
        """Why the file does not fit a judge on this model with the methods' prompts as they are now; None when it
        fits. model None: the model is not known yet (only the layouts are checked; the model later)."""
        mismatch = model.mismatch(self.judge_model, self.redo) if model is not None else None
        if mismatch is not None:
            return Refusal(*mismatch)
        for method, recorded in sorted(self.layouts().items()):
            now = layout_version(method)
            if recorded != now:
                field = "prompt_layout" if isinstance(self.prompt_layout, str) else f"prompt_layout.{method}"
                return Refusal(field, now, recorded, f"another prompt layout of the {method} method "
                                                     f"({self.redo_layout})")
        return None

    def check(self, model: ModelIdentity | None) -> None:
        """Refuse the file (the kind's error) unless it fits a judge on this model with the current prompts."""
        refusal = self.refusal(model)
        if refusal is not None:
            raise self.refused(refusal)

    def refused(self, refusal: Refusal) -> FittedFileError:
        return self.error(f"{self.path}: {refusal.field}: expected {refusal.expected!r} (the judge's), found "
                          f"{refusal.found!r}; this {self.noun} was {self.fitted} for {refusal.fitted_for}")

    # -- writing -------------------------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        return {"format": FORMAT, "judge_model": self.judge_model.to_dict(), "prompt_layout": self.prompt_layout}

    def body(self) -> dict[str, Any]:
        """The kind's own fields, in the file's order."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {**self.header(), **self.body()}

    def write(self, path: str | Path) -> None:
        write_json_whole(path, self.to_dict(), indent=self.json_indent)

    # -- reading -------------------------------------------------------------------------------------------
    @classmethod
    def load(cls: type[F], path: str | Path) -> F:
        """Read and validate a file of this kind; the kind's error names the path and the field."""
        where = str(path)
        try:
            data = json.loads(read_judge_file(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise cls.error(f"{where}: cannot read the {cls.noun} file: {exc}") from None
        except json.JSONDecodeError as exc:
            raise cls.error(f"{where}: not JSON: {exc}") from None
        return cls.from_dict(data, where)

    @classmethod
    def from_dict(cls: type[F], data: Any, where: str) -> F:
        raise NotImplementedError


@dataclass(frozen=True)
class Header:
    """The header fields of a file, validated."""
    judge_model: ModelIdentity
    prompt_layout: str | dict[str, str]


class FieldErrors:
    """The kind's error for one file, naming the field: `{where}: {field}: expected ..., found ...`."""

    def __init__(self, error: type[FittedFileError], where: str):
        self.error, self.where = error, where

    def bad(self, name: str, expected: str, found: Any) -> FittedFileError:
        shown = found if not isinstance(found, list) or len(found) < 8 else f"a list of {len(found)}"
        return self.error(f"{self.where}: {name}: expected {expected}, found {shown!r}")


def read_header(data: Any, own_fields: tuple[str, ...], bad: FieldErrors, *,
                required: Iterable[str] | None = None) -> Header:
    """The header of a file's content: every field known (the header's and the kind's own) and each required one
    present (all of them unless `required` says which), the format, the model and the prompt layout."""
    fields = (*HEADER_FIELDS, *own_fields)
    if not isinstance(data, dict):
        raise bad.bad("(top level)", "an object", type(data).__name__)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise bad.bad(unknown[0], f"only the fields {', '.join(fields)}", unknown[0])
    missing = [name for name in (fields if required is None else required) if name not in data]
    if missing:
        raise bad.bad(missing[0], f"the fields {', '.join(fields)}", "nothing")
    if data.get("format") != FORMAT or isinstance(data.get("format"), bool):
        raise bad.bad("format", str(FORMAT), data.get("format"))
    return Header(read_model(data.get("judge_model"), bad), read_layout(data.get("prompt_layout"), bad))


def read_model(model: Any, bad: FieldErrors) -> ModelIdentity:
    if not isinstance(model, dict) or set(model) - {"name", "weights_sha256", "quantization"}:
        raise bad.bad("judge_model", "an object {name, weights_sha256, quantization}", model)
    quantization = model.get("quantization")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise bad.bad("judge_model.quantization", f"null or one of {', '.join(map(json.dumps, QUANTIZATIONS))}",
                      quantization)
    if not isinstance(model.get("name"), str) or not model["name"]:
        raise bad.bad("judge_model.name", "the model's name (a non-empty string)", model.get("name"))
    sha = model.get("weights_sha256")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                and all(c in "0123456789abcdef" for c in sha)):
        raise bad.bad("judge_model.weights_sha256", "64 lower-case hex digits or null", sha)
    return ModelIdentity(model["name"], sha, quantization)


def read_layout(layout: Any, bad: FieldErrors) -> str | dict[str, str]:
    """One version for every method the file covers, or {method: version}."""
    def version(value: Any) -> bool:
        return isinstance(value, str) and bool(value)

    if version(layout):
        return layout
    if isinstance(layout, dict) and layout and all(version(v) for v in layout.values()):
        return dict(layout)
    raise bad.bad("prompt_layout", "the prompt-layout version (a string, or {method: version})", layout)


def check_layout_covers(prompt_layout: str | dict[str, str], covers: Iterable[str], bad: FieldErrors) -> None:
    """A per-method layout names exactly the methods the file covers."""
    if isinstance(prompt_layout, str):
        return
    wanted, named = sorted(set(covers)), sorted(prompt_layout)
    if wanted != named:
        raise bad.bad("prompt_layout", f"a version for each of {', '.join(map(repr, wanted))}", named)


def compact_layouts(layouts: Mapping[str, str]) -> str | dict[str, str]:
    """One string when every method is at the same version, else {method: version} in name order."""
    versions = set(layouts.values())
    return next(iter(versions)) if len(versions) == 1 else dict(sorted(layouts.items()))


# -- files on disk -----------------------------------------------------------------------------------------

def write_json_whole(path: str | Path, data: Any, *, indent: int) -> None:
    """A judge file written whole or not at all (a temporary file beside it, renamed over the target)."""
    path = Path(path)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staging.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")
    os.replace(staging, path)


def read_judge_file(path: str | Path) -> str:
    """The text of a fitted file: a regular file of at most MAX_JUDGE_FILE_BYTES, UTF-8 (OSError or
    UnicodeDecodeError otherwise: a FIFO, /dev/zero or a huge file is refused before it is read)."""
    from rubrics.input_files import MAX_JUDGE_FILE_BYTES, read_input_file

    return read_input_file(path, MAX_JUDGE_FILE_BYTES).decode("utf-8")


# -- files shipped with the package ------------------------------------------------------------------------

def strict_fitted_files() -> bool:
    """Whether a refused shipped file stops the judge ($RUBRICS_STRICT_FITTED_FILES set, as the tests set it)."""
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def load_shipped(kind: type[F], path: Path, model: ModelIdentity) -> F | None:
    """The file of this kind shipped at path for the model; None when none is shipped there. A shipped file that
    cannot be read raises (the kind's error). One refused for the model (other weights than the catalog's, or a
    method it covers whose prompts changed since it was fitted) raises ShippedFileError under
    $RUBRICS_STRICT_FITTED_FILES, else warns (ShippedFileWarning) and gives None: the judge runs without it."""
    if not path.is_file():
        return None
    shipped = kind.load(path)
    # By the file's own model name: a server may serve the model under its catalog name, which the catalog maps to
    # this file already; the weights and the quantization are the judge's.
    refusal = shipped.refusal(ModelIdentity(shipped.judge_model.name, model.weights_sha256, model.quantization))
    if refusal is None:
        return shipped
    why = str(shipped.refused(refusal))
    if strict_fitted_files():
        raise ShippedFileError(f"{why}. It ships with the package for this model, so the package is broken: fit it "
                               f"again for the model and the prompts as they are now ({STRICT_ENV} is set: this "
                               "stops the judge instead of running it without the file)")
    warnings.warn(ShippedFileWarning(f"{why}. It ships with the package for this model: the judge runs without it "
                                     "(its probabilities may be off); please report it"), stacklevel=4)
    return None
