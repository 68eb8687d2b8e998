"""The judge models the embedded judge knows: for each catalog model, the method it judges with and the
calibration it ships with; and which model judges when none is named.

A catalog model (judge_engine's catalog: `rubric model list`) ships a calibration file per model
(rubrics/judges/fitted/calibrations/<catalog name>.json, in the format of rubrics/judges/fitted/calibration_file.py, fitted
with `rubric judge-eval --fit-calibration --write` on the shipped labels) and a default method, both chosen by
benchmarks/judge_quality.py. A model outside the catalog (a local path) gets the identity calibration and a
warning that names the command that fits one: never another model's calibration, whose raw scores mean other
things. Adding a judge model: its catalog entry (judge_engine/loading/catalog/), its calibration file here, one line in
JUDGE_MODELS.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from rubrics.judges.fitted.calibration_file import QUANTIZATIONS, CalibrationFile, ModelIdentity
from rubrics.judges.fitted.fitted_file import load_shipped
from rubrics.judges.fitted.verdict_head import VerdictHead

CALIBRATIONS = Path(__file__).parent / "calibrations"
# A catalog model's trained verdict head (the head method), where one beats the model's best zero-shot method on
# the held-out domains: heads/<catalog name>.json, trained on the training domains by benchmarks/judge_quality.py.
HEADS = Path(__file__).parent / "heads"
JUDGE_MODEL_ENV = "RUBRICS_JUDGE_MODEL"
# The default judge, chosen by the rule of the README's "How good is the embedded judge?": the most accurate on
# labelled domains its calibration was not fitted on, among the models whose quickstart (download and conversion
# included) runs in under 5 minutes and 8 GB on a 2-core machine.
DEFAULT_JUDGE_MODEL = "qwen2.5-coder-1.5b-instruct"
# A model outside the catalog: the choice method, whose raw score with the identity calibration is already a
# probability (P(Yes) / (P(Yes) + P(No))); the other methods' raw scores mean nothing until calibrated.
UNCATALOGUED_METHOD = "choice"


@dataclass(frozen=True)
class JudgeModel:
    catalog_name: str
    method: str   # for items that name none
    # where `method` is the head and no head is shipped for the model as it runs (another quantization): the best
    # zero-shot method instead
    zero_shot: str | None = None
    # how the model computes on the CPU unless asked otherwise (None: float32 results): a quantization only where
    # its held-out figures are within 0.02 of float32's and a calibration is fitted for it (docs/judge-quality.md)
    quantization: str | None = None

    def method_for(self, has_head: bool) -> str:
        return self.zero_shot if self.method == "head" and not has_head and self.zero_shot else self.method


JUDGE_MODELS: dict[str, JudgeModel] = {model.catalog_name: model for model in (
    JudgeModel("smollm2-135m-instruct", "head", zero_shot="statement"),
    JudgeModel("qwen2.5-coder-0.5b-instruct", "head", zero_shot="likelihood"),
    JudgeModel("qwen2.5-coder-1.5b-instruct", "choice", quantization="int8"),
)}
# The quantization a user names to run a catalog model unquantized where its default is not (float32 results)
NO_QUANTIZATION = "none"
QUANTIZATION_CHOICES = (*QUANTIZATIONS, NO_QUANTIZATION)   # --quantization's


class UncalibratedJudgeWarning(UserWarning):
    """A judge model without a calibration of its own: its probabilities are the methods' raw scores."""


def default_judge_model() -> str:
    """$RUBRICS_JUDGE_MODEL (a catalog name or a path), else DEFAULT_JUDGE_MODEL."""
    return os.environ.get(JUDGE_MODEL_ENV) or DEFAULT_JUDGE_MODEL


def default_quantization(model: str | None, device: str = "cpu") -> str | None:
    """The quantization a judge on ``model`` (a catalog name, or a path) runs with when none is asked: its catalog
    entry's on the CPU, None (float32) for any other model or device."""
    known = JUDGE_MODELS.get(model) if model is not None else None
    return known.quantization if known is not None and device == "cpu" else None


def catalog_name_of(identity: ModelIdentity) -> str | None:
    """The catalog name of the model with this identity (by its digest when known, else by its name)."""
    from judge_engine import catalog_models

    for entry in catalog_models():
        if identity.weights_sha256 and entry.sha256 == identity.weights_sha256:
            return entry.name
        if not identity.weights_sha256 and identity.name in (entry.model, entry.name):
            return entry.name
    return None


def judge_model_of(identity: ModelIdentity) -> JudgeModel | None:
    name = catalog_name_of(identity)
    return JUDGE_MODELS.get(name) if name else None


def shipped_calibration(identity: ModelIdentity) -> CalibrationFile | None:
    """The calibration file shipped for this model; None for a model outside the catalog or without one. A shipped
    file refused for the model (other weights, or prompts changed since its fit) is fitted_file.load_shipped's
    call: an error under $RUBRICS_STRICT_FITTED_FILES (the tests), else a warning and None."""
    name = catalog_name_of(identity)
    if name is None:
        return None
    return load_shipped(CalibrationFile, shipped_calibration_path(name, identity.quantization), identity)


def shipped_calibration_path(name: str, quantization: str | None = None) -> Path:
    """calibrations/<catalog name>.json, or <catalog name>.<quantization>.json for a model computing otherwise
    (its raw scores differ a little: a float32 fit is never applied to int8)."""
    return _shipped_file(CALIBRATIONS, name, quantization)


def shipped_head_path(name: str, quantization: str | None = None) -> Path:
    """heads/<catalog name>.json, or <catalog name>.<quantization>.json (a head reads one model's hidden states as
    that model computes them)."""
    return _shipped_file(HEADS, name, quantization)


def _shipped_file(folder: Path, name: str, quantization: str | None) -> Path:
    return folder / (f"{name}.{quantization}.json" if quantization else f"{name}.json")


def shipped_head(identity: ModelIdentity) -> VerdictHead | None:
    """The verdict head shipped for this model; None when it has none or
    for a model outside the catalog; refused as shipped_calibration says."""
    name = catalog_name_of(identity)
    if name is None:
        return None
    return load_shipped(VerdictHead, shipped_head_path(name, identity.quantization), identity)


def warn_uncalibrated(model: str | None, identity: ModelIdentity, method: str | None = None) -> None:
    """model: as the user named it (None for a judge on an LLM they built); method: the judge's method, when the
    model's shipped calibration has no entry for it."""
    named = model if model is not None else identity.name
    if catalog_name_of(identity) is None:
        why = "is not in the catalog and has no calibration"
    elif method:   # its calibration file has no entry for the method
        why = f"has no calibration shipped for the {method} method" + \
            (f" in {identity.quantization}" if identity.quantization else "")
    elif identity.quantization:
        why = f"has no calibration fitted for quantization {identity.quantization}"
    else:
        why = "has no calibration shipped for it"
    warnings.warn(UncalibratedJudgeWarning(
        f"judge model {named}{f' ({identity.name})' if named != identity.name else ''} {why}: its probabilities "
        f"are the methods' raw scores. Fit one "
        f"on labels of your own: rubric judge-eval LABELS.jsonl --rubric RUBRIC --model {named} --method METHOD "
        "--fit-calibration --write calibration.json, then rubric grade --calibration calibration.json"),
        stacklevel=3)
