"""The trust lifecycle, one entry point: labels judged, figures and fits, heads trained, fitted files written.

`rubric judge-eval`, `rubric judge-train`, the viewer's judge-eval page and benchmarks/judge_quality.py call these
functions instead of composing the steps themselves:

    judge_label_files     every labels file judged with its rubric (rubric judge-eval)
    fit_judged            the method's calibration fitted in-sample, or leaving each domain out (--cross-validate)
    report_judged         the report, and with fit_thresholds the proposed thresholds and their held-out figures
    write_calibration     a fitted calibration into a user's calibration file (rubric judge-eval --write)
    write_label_rows      the judge-eval file with one row per label (VerdictRecorder keeps what each verdict
                          read), that the viewer opens as LabelRow and Agreement figures
    train_head            a verdict head on labels (rubric judge-train)
    method_report         a method's figures on the fixed split, as benchmarks/judge_quality.py reports them
    write_shipped_calibration, write_shipped_head, record_shipped_quality
                          the catalog model's shipped files (rubrics/judges/fitted/calibrations/, heads/) and
                          quality.json, from the benchmark's reports
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubrics.trust import cross_validation as cv
from rubrics.trust import metrics
from rubrics.trust.export import LabelRow, VerdictRecorder, export, label_rows
from rubrics.trust.labels import ExamplesRemoved, Judged, judge_labels, load_labels
from rubrics.trust.metrics import Agreement

__all__ = ["Agreement", "LabelRow", "LayerError", "VerdictRecorder", "catalog_identity", "fit_judged", "judge_identity", "judge_label_files",
           "method_report", "raw_probabilities", "record_shipped_quality", "report_judged", "shipped_calibrations",
           "train_head", "write_calibration", "write_label_rows", "write_shipped_calibration", "write_shipped_head"]


# rubric judge-eval

def judge_label_files(labels_paths: Sequence[str], rubric_paths: Sequence[str], judge: Any,
                      no_examples: bool = False) -> tuple[list[Judged], list[str]]:
    """Every labels file judged with its rubric (one rubric for all files, or one per file); the labels on items
    the rubric lacks, as warnings. no_examples: the items' few-shot examples dropped."""
    from rubrics.rubric.load import load_rubric

    if no_examples:
        judge = ExamplesRemoved(judge)
    judged, skipped = [], []
    for index, labels_path in enumerate(labels_paths):
        rubric = load_rubric(rubric_paths[min(index, len(rubric_paths) - 1)])
        part, part_skipped = judge_labels(load_labels(labels_path), rubric, judge)
        judged += part
        skipped += part_skipped
    return judged, skipped


def fit_judged(judged: list[Judged], method: str, *, cross_validate: bool = False
               ) -> tuple[list[Judged], dict[str, Any], Any]:
    """The method's calibration fitted on raw scores: leaving each domain out (cross_validate; the judgments then
    as the judge ships), else in-sample. Returns the judgments to report, the figures (in report order) and the
    in-sample fit (None when cross-validated). A ValueError says why the domains do not cross-validate."""
    if cross_validate:
        figures = {"cross_validation": cv.domain_report(method, judged)}
        judged = cv.as_shipped(judged, method)   # the per-item report shows the judge as it ships
        figures["as_shipped"] = metrics.summary(judged)
        return judged, figures, None
    judged, fit = cv.calibrate(judged)
    return judged, {"calibration": {method: {"scale": fit.scale, "offset": fit.offset}}}, fit


def report_judged(judged: list[Judged], fit_thresholds: bool = False) -> tuple[dict[str, Any], dict[str, float]]:
    """The report (per item and overall) and, with fit_thresholds, the proposed thresholds, the report with them
    and leaving each trajectory out; returns the figures and the thresholds the report counted with."""
    report = metrics.evaluate(judged)
    figures = {"report": metrics.report_dict(report)}
    if fit_thresholds:
        fitted = cv.fit_thresholds(judged)
        figures["fitted_thresholds"] = fitted
        figures["report_with_fitted_thresholds"] = metrics.report_dict(metrics.evaluate(judged, fitted))
        figures["leave_one_trajectory_out"] = metrics.report_dict(cv.cross_validated(judged))
    return figures, report.thresholds


def write_calibration(path: str, judge, fits: dict) -> str:
    """Write the fits with the identity of the judge that produced the raw scores; returns the path. A valid file
    already there for the same model and prompt layout keeps its entries for other methods; any other is
    replaced."""
    from rubrics.judges.fitted.calibration_file import CalibrationFile, CalibrationFileError, load_calibration_file

    identity = judge.identity() if callable(getattr(judge, "identity", None)) else None
    if identity is None:
        raise ValueError(f"the judge {getattr(judge, 'name', judge)!r} does not say which model it runs")
    entries = dict(fits)
    try:
        existing = load_calibration_file(path)
        existing.check(identity)
        entries = {**existing.calibrations, **fits}
    except CalibrationFileError:   # none there, or one for another judge: replaced
        pass
    CalibrationFile(identity, entries).write(path)
    return path


def write_label_rows(path: str, output: dict, judged: list, thresholds: dict, recorder: VerdictRecorder | None
                     ) -> None:
    """The judge-eval file `rubric view` opens: the output and one row per label (OSError, ValueError)."""
    from rubrics.trajectory.json_text import dumps

    with open(path, "w", encoding="utf-8") as out:
        out.write(dumps(export(output, label_rows(judged, thresholds, recorder)), indent=2) + "\n")


# rubric judge-train

def train_head(labelled: list, model: str | None, *, quantization: str | None = None,
               layers: Sequence[int] | None = None, warn=None) -> dict[str, Any]:
    """A verdict head fitted on the labelled sets [(labels, rubric)]: the embedded judge model reads every
    labelled judgment once (the choice prompt); layer and weight decay chosen leaving whole domains out. Returns
    {"head", "judge", "examples", "left_out", "selection", "layers"}; a candidate layer outside the model raises
    LayerError, too few labels ValueError. warn(line) hears each label left out."""
    from rubrics.judges.backends.embedded import EmbeddedJudge
    from rubrics.judges.fitted.verdict_head import HeadProbe
    from rubrics.trust import head_training as ht

    options = {"quantization": quantization} if quantization else {}
    probe_judge = EmbeddedJudge(model, method="choice", **options)
    depth = probe_judge.llm.num_layers
    layers = tuple(sorted(set(layers))) if layers else ht.candidate_layers(depth)
    bad = [n for n in layers if not 0 <= n <= depth]
    if bad:
        raise LayerError(f"--layer {bad[0]}: the model has layers 0 to {depth}")
    judge = EmbeddedJudge(model, method="head", head=HeadProbe(layers), llm=probe_judge.llm, **options)
    examples, left_out = ht.extract_examples(labelled, judge)
    for line in left_out:
        if warn is not None:
            warn(line)
    selection = ht.select_and_fit(examples, layers)
    head = ht.as_head(selection.fit, judge.identity(), examples)
    in_sample = ht.head_probabilities(selection.fit, examples, layers)
    return {"head": head, "judge": judge, "examples": examples, "left_out": left_out, "selection": selection,
            "in_sample": metrics.summary([Judged(e.label, p, None) for e, p in zip(examples, in_sample)])}


class LayerError(ValueError):
    """A candidate layer the model does not have."""


# benchmarks/judge_quality.py: figures on the fixed split, and the catalog model's shipped files

def method_report(method: str, judged: list, split, shipped: dict, held_out_only: bool = False) -> dict:
    """A method's figures. shipped: the model's shipped calibrations {method: Calibration} (none outside the
    catalog). With the split: the calibration fitted on its training domains, measured on the held-out ones (the
    headline), beside the held-out labels under the shipped calibration and under none; without it (split None):
    each domain left out in turn. held_out_only: only the held-out domains were judged, so nothing is fitted:
    their figures under the shipped calibration."""
    from rubrics.judges.methods import IDENTITY

    calibration = shipped.get(method, IDENTITY)
    if held_out_only:
        return {"held_out_as_shipped": cv.summary_with_domains(cv.recalibrated(judged, calibration)),
                "raw": raw_probabilities(judged)}
    if split is None:
        report = cv.domain_report(method, judged)
        report["as_shipped"] = metrics.summary(cv.recalibrated(judged, calibration))
        return report
    report = cv.split_report(method, judged, split)
    # beside the headline, the same held-out labels under the shipped calibration and under none: what a user of
    # the catalog model gets on a new domain, and what the calibration is worth there
    held = [j for j in judged if j.label.domain in split.held_out]
    report["held_out_as_shipped"] = metrics.summary(cv.recalibrated(held, calibration))
    report["held_out_identity"] = metrics.summary(held)
    return report


def line_of(source: str) -> str:
    """"labels.jsonl:12" -> "12"."""
    return source.rsplit(":", 1)[-1]


def raw_probabilities(judged: list) -> dict[str, float | None]:
    """Each label's uncalibrated probability by its source ("domain/labels.jsonl:LINE"): two runs on the same
    labels (float32 and int8, say) compared label by label."""
    return {f"{j.label.domain}:{line_of(j.label.source)}": j.probability for j in judged}


def judge_identity(model: str | None, llm):
    """The judge's model identity, its quantization included (an int8 judge is calibrated on its own)."""
    from dataclasses import replace

    from rubrics.judges.backends.embedded import embedded_identity

    return replace(embedded_identity(model, llm), quantization=llm.quantization or None)


def shipped_calibrations(model: str | None, llm) -> dict:
    """The model's shipped calibrations {method: Calibration}; none outside the catalog."""
    from rubrics.judges.fitted.judge_models import shipped_calibration

    shipped = shipped_calibration(judge_identity(model, llm))
    return dict(shipped.calibrations) if shipped is not None else {}


def catalog_identity(model: str, llm, otherwise: str):
    """The judge's identity and its catalog name, for a writer of the catalog's files; a model outside the catalog
    stops the run, saying what to do instead."""
    from rubrics.judges.fitted.judge_models import catalog_name_of

    identity = judge_identity(model, llm)
    name = catalog_name_of(identity)
    if name is None:
        raise SystemExit(f"{model}: not a catalog model; {otherwise}")
    return identity, name


def write_shipped_calibration(model: str, llm, reports: dict[str, dict]) -> None:
    """Each method's fit into the model's calibration file: on the training domains of the split (without the
    split: on every label, in-sample); the headline held-out figures into quality.json. The head is not a
    calibration: it is written by write_shipped_head."""
    from rubrics.judges.fitted.calibration_file import CalibrationFile, load_calibration_file
    from rubrics.judges.fitted.judge_models import DEFAULT_JUDGE_MODEL, shipped_calibration_path
    from rubrics.judges.methods import Calibration
    from rubrics.trust.quality import QUALITY_FILE, quality_table, record_quality

    identity, name = catalog_identity(model, llm, "fit its calibration with rubric judge-eval --fit-calibration")
    reports = {method: r for method, r in reports.items() if method != "head"}
    path = shipped_calibration_path(name, identity.quantization)
    kept = dict(load_calibration_file(path).calibrations) if path.is_file() else {}

    def fitted(method: str, report: dict) -> Calibration:
        fit = (report["held_out"] if "held_out" in report else report["in_sample"])["fits"][method]
        return Calibration(round(fit["scale"], 4), round(fit["offset"], 4))

    fits = {method: fitted(method, r) for method, r in reports.items()}
    CalibrationFile(identity, {**kept, **fits}).write(path)
    table = quality_table() or {"default": DEFAULT_JUDGE_MODEL, "models": {}}
    record_quality(table, name, identity.quantization, reports)
    print(f"wrote {path} and {QUALITY_FILE}")


def write_shipped_head(model: str, llm, head, reports: dict[str, dict]) -> None:
    """The head on every training label into heads/<catalog name>[.<quantization>].json, and its held-out figures
    beside the methods' in quality.json."""
    from rubrics.judges.fitted.judge_models import shipped_head_path
    from rubrics.trust.quality import QUALITY_FILE, existing_quality_table, record_quality

    identity, name = catalog_identity(model, llm, "train its head with rubric judge-train")
    path = shipped_head_path(name, identity.quantization)
    path.parent.mkdir(parents=True, exist_ok=True)
    head.write(path)
    record_quality(existing_quality_table(), name, identity.quantization, {"head": reports["head"]})
    print(f"wrote {path} and {QUALITY_FILE}")


def record_shipped_quality(model: str, llm, reports: dict[str, dict]) -> None:
    """Each zero-shot method's held-out figures under the shipped calibration into quality.json, nothing else
    written: for a model whose shipped calibration was fitted on training domains before the split's other
    training domains were labelled, and whose pass over them all costs hours."""
    from rubrics.trust.quality import QUALITY_FILE, existing_quality_table, record_quality

    identity, name = catalog_identity(model, llm, "its figures are not recorded")
    shipped = {method: {"held_out_as_shipped": r["held_out_as_shipped"]} for method, r in reports.items()
               if method != "head"}
    record_quality(existing_quality_table(), name, identity.quantization, shipped)
    print(f"wrote {QUALITY_FILE}")
