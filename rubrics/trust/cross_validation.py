"""Fits on the judgments and their held-out estimates: per-item thresholds (and leaving each trajectory out), a
method's calibration (in-sample, and leaving each domain out), and the method's built-in calibration as shipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rubrics.trust.labels import Judged
from rubrics.trust.metrics import EvalReport, agreement, summary
from rubrics.judges.methods.base import Calibration


def fit_thresholds(judged: Sequence[Judged]) -> dict[str, float]:
    """Per item, the threshold that maximises balanced accuracy on the labels (ties: the one nearest 0.5).

    Candidates are midpoints between consecutive distinct probabilities. Fitted in-sample: with a few labels
    per item this overfits, which the report says next to the figures.
    """
    fitted = {}
    for item in dict.fromkeys(j.item_id for j in judged):
        pairs = [(j.label.met, j.probability) for j in judged if j.item_id == item and j.probability is not None]
        if not pairs:
            continue
        values = sorted({p for _, p in pairs})
        candidates = [0.5] + [(a + b) / 2 for a, b in zip(values, values[1:])]
        candidates += [values[0] / 2, (values[-1] + 1) / 2]
        # Thresholds must lie strictly inside (0, 1) to be valid in a rubric.
        candidates = sorted({round(min(max(t, 0.001), 0.999), 4) for t in candidates})
        fitted[item] = max(candidates, key=lambda t: (agreement(pairs, t).balanced_accuracy, -abs(t - 0.5)))
    return fitted


def cross_validated(judged: Sequence[Judged]) -> EvalReport:
    """Leave one trajectory out: each verdict counted with thresholds fitted on the other trajectories only,
    an honest estimate of what --fit-thresholds buys on unseen trajectories."""
    verdicts = []
    for key in dict.fromkeys(j.label.trajectory_key for j in judged):
        fitted = fit_thresholds([j for j in judged if j.label.trajectory_key != key])
        for j in judged:
            if j.label.trajectory_key == key:
                p = j.probability
                hard = None if p is None else (1.0 if p >= fitted.get(j.item_id, 0.5) else 0.0)
                verdicts.append((j, hard))
    items = list(dict.fromkeys(j.item_id for j in judged))
    per_item = {}
    for item in items:
        counted = agreement([(j.label.met, hard) for j, hard in verdicts if j.item_id == item])
        raw = agreement([(j.label.met, j.probability) for j in judged if j.item_id == item])
        per_item[item] = replace(counted, brier=raw.brier)
    counted = agreement([(j.label.met, hard) for j, hard in verdicts])
    overall = replace(counted, brier=agreement([(j.label.met, j.probability) for j in judged]).brier)
    return EvalReport(overall, per_item, {})


def fit_calibration(judged: Sequence[Judged]) -> Calibration:
    """(scale, offset) by logistic regression of the labels on the raw scores, read back as logit(probability)
    from judgments made with the identity calibration."""
    from rubrics.judges.fitted.logistic import fit_logistic, logit

    scored = [j for j in judged if j.probability is not None and not j.no_evidence]
    if not scored:
        raise ValueError("no judged labels to fit a calibration on")
    return Calibration(*fit_logistic([logit(j.probability) for j in scored], [j.label.met for j in scored]))


def recalibrated(judged: Sequence[Judged], calibration: Calibration) -> list[Judged]:
    """The judgments (made with the identity calibration) with probabilities calibration.probability(raw)."""
    from rubrics.judges.fitted.logistic import logit

    return [j if j.probability is None or j.no_evidence
            else replace(j, probability=calibration.probability(logit(j.probability))) for j in judged]


def calibrate(judged: Sequence[Judged]) -> tuple[list[Judged], Calibration]:
    """Fit a method's calibration on all the judgments and return them recalibrated with the fit (in-sample)."""
    fit = fit_calibration(judged)
    return recalibrated(judged, fit), fit


def leave_one_domain_out(judged: Sequence[Judged]) -> tuple[list[Judged], dict[str, Calibration]]:
    """Each domain's judgments recalibrated with a fit on every other domain: what a rubric from a domain the
    calibration never saw gets. Returns the judgments (in input order) and each held-out domain's fit."""
    domains = list(dict.fromkeys(j.label.domain for j in judged))
    if len(domains) < 2:
        raise ValueError(f"cross-validation by domain needs labels from 2 domains or more, got {domains}")
    fits = {domain: fit_calibration([j for j in judged if j.label.domain != domain]) for domain in domains}
    return [recalibrated([j], fits[j.label.domain])[0] for j in judged], fits


def as_shipped(judged: Sequence[Judged], method: str) -> list[Judged]:
    """The judgments (made with the identity calibration) with the method's built-in calibration."""
    from rubrics.judges.methods import METHOD_CLASSES

    return recalibrated(judged, METHOD_CLASSES[method].default_calibration)


def domain_report(method: str, judged: Sequence[Judged]) -> dict[str, Any]:
    """`judge-eval --cross-validate domain`: the method's calibration fitted in-sample (all domains) and leaving each
    domain out, with agreement by difficulty, per held-out domain, and the same-item pair ranking."""
    from dataclasses import asdict

    in_sample, fit = calibrate(judged)
    held_out, fold_fits = leave_one_domain_out(judged)
    return {"in_sample": {**summary(in_sample), "fits": {method: asdict(fit)}},
            "leave_one_domain_out": {**summary(held_out), "per_domain": {
                domain: {**summary([j for j in held_out if j.label.domain == domain]),
                         "fits": {method: asdict(domain_fit)}}
                for domain, domain_fit in fold_fits.items()}}}


def split_report(method: str, judged: Sequence[Judged], split: Any) -> dict[str, Any]:
    """The headline of a fixed split (rubrics.trust.split.LabelSplit): the method's calibration fitted on the
    training domains, applied to the held-out domains (figures by difficulty and per held-out domain); beside it,
    leaving each training domain out over the training domains."""
    from dataclasses import asdict

    train = [j for j in judged if j.label.domain in split.train]
    held = [j for j in judged if j.label.domain in split.held_out]
    if not train or not held:
        raise ValueError("a split report needs labels in training and in held-out domains")
    fit = fit_calibration(train)
    return {"held_out": {**summary_with_domains(recalibrated(held, fit)), "fits": {method: asdict(fit)}},
            "train": domain_report(method, train)}


def summary_with_domains(judged: Sequence[Judged]) -> dict[str, Any]:
    """summary() of the judgments, and of each domain's under "per_domain" (in order of first appearance)."""
    domains = list(dict.fromkeys(j.label.domain for j in judged))
    return {**summary(judged),
            "per_domain": {d: summary([j for j in judged if j.label.domain == d]) for d in domains}}
