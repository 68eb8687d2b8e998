"""Agreement of a judge with human labels: the numbers behind `rubric judge-eval`.

A labels file has one JSON object a line: {"trajectory": PATH or {inline trajectory}, "item_id": ID, "met": BOOL},
optionally "difficulty": "clear" | "hard" (plainly decided by the evidence, or needing inference), "domain" (default:
the name of the labels file's folder) and a free "note". A PATH is relative to the labels file; "file.jsonl#ID"
picks the trajectory with that id out of a JSONL file.
Every labelled trajectory is graded once, all in one `score_many` batch, and each label is compared with the
judge's verdict on that item. Metrics are computed over the evaluated labels; judge errors are counted apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubrics.judges.methods.base import Calibration
from rubrics.judges.protocol import JudgeRequest, MemberVerdict, Verdict


DIFFICULTIES = ("clear", "hard")


class LabelsError(ValueError):
    """A labels file that cannot be read; the message names file:line."""


@dataclass(frozen=True)
class Label:
    trajectory_key: str  # where the trajectory came from (for grading each one once)
    trajectory: Any  # rubrics.trajectory.Trajectory
    item_id: str
    met: bool
    source: str  # "labels.jsonl:12"
    domain: str = ""
    difficulty: str | None = None  # "clear" | "hard"; None when the labels file does not say


@dataclass(frozen=True)
class Judged:
    label: Label
    probability: float | None
    error: str | None
    members: tuple[MemberVerdict, ...] = ()   # a panel judge's members' verdicts
    # unmet without asking the judge (no evidence at all): probability 0, and no raw score for a calibration fit
    no_evidence: bool = False

    @property
    def item_id(self) -> str:
        return self.label.item_id


@dataclass(frozen=True)
class Agreement:
    n: int
    errors: int
    positives: int
    accuracy: float | None
    balanced_accuracy: float | None
    kappa: float | None
    brier: float | None


@dataclass
class EvalReport:
    overall: Agreement
    per_item: dict[str, Agreement]
    thresholds: dict[str, float]  # the thresholds the verdicts were counted with
    skipped: list[str] = field(default_factory=list)  # labels on items that are not judge items, or unknown


def load_labels(path: str | Path) -> list[Label]:
    from rubrics.trajectory.json_text import loads, text_lines
    from rubrics.trajectory import load_trajectory

    path = Path(path)
    labels: list[Label] = []
    cache: dict[str, Any] = {}
    for text_line in text_lines(path.read_bytes()):
        line, where = text_line.text, f"{path}:{text_line.number}"
        if text_line.error is not None:
            raise LabelsError(f"{where}: {text_line.error}")
        if not line.strip():
            continue
        try:
            row = loads(line)
            ref, met, item_id = row["trajectory"], row["met"], row["item_id"]
        except (ValueError, KeyError, TypeError) as exc:   # JSONTextError is a ValueError, with its column
            raise LabelsError(f"{where}: expected {{trajectory, item_id, met}} as JSON: {exc}") from exc
        if not isinstance(met, bool) or not isinstance(item_id, str):
            raise LabelsError(f"{where}: 'met' must be true or false and 'item_id' a string")
        difficulty, domain = row.get("difficulty"), row.get("domain", path.resolve().parent.name)
        if difficulty not in (None, *DIFFICULTIES):
            raise LabelsError(f"{where}: 'difficulty' must be one of {', '.join(DIFFICULTIES)}, got {difficulty!r}")
        if not isinstance(domain, str) or not domain:
            raise LabelsError(f"{where}: 'domain' must be a non-empty string")
        if isinstance(ref, dict):
            key = f"{where}"
            trajectory = load_trajectory(ref)
        elif isinstance(ref, str):
            key = str((path.parent / ref).resolve())
            if key not in cache:
                cache[key] = _load_referenced(path.parent, ref, where)
            trajectory = cache[key]
        else:
            raise LabelsError(f"{where}: 'trajectory' must be a path or an inline trajectory object")
        labels.append(Label(key, trajectory, item_id, met, where, domain, difficulty))
    return labels


def _load_referenced(base: Path, ref: str, where: str) -> Any:
    from rubrics.trajectory import iter_trajectory_file, load_trajectory

    file_part, _, wanted_id = ref.partition("#")
    file = base / file_part
    if not file.exists():
        raise LabelsError(f"{where}: trajectory file {file} not found")
    if not wanted_id:
        try:
            return load_trajectory(file)
        except Exception as exc:  # noqa: BLE001 - reported with the label's line
            raise LabelsError(f"{where}: {exc}") from exc
    for loaded in iter_trajectory_file(file):
        if not isinstance(loaded, Exception) and loaded.id == wanted_id:
            return loaded
    raise LabelsError(f"{where}: no trajectory with id {wanted_id!r} in {file}")


class ExamplesRemoved:
    """A judge wrapper that drops the few-shot examples of every request (judge-eval --no-examples)."""

    def __init__(self, judge: Any):
        self.inner = judge
        self.name = judge.name

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return self.inner.judge([replace(request, item=replace(request.item, examples=())) for request in requests])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def judge_labels(labels: Sequence[Label], rubric: Any, judge: Any) -> tuple[list[Judged], list[str]]:
    """Grade each labelled trajectory once (one batch) and pair each label with the judge's probability."""
    from rubrics.grading.scoring import score_many

    keys = list(dict.fromkeys(label.trajectory_key for label in labels))
    trajectories = {label.trajectory_key: label.trajectory for label in labels}
    results = score_many([trajectories[key] for key in keys], rubric, judge=judge)
    by_key = {key: {item.id: item for item in result.items} for key, result in zip(keys, results)}
    judged, skipped = [], []
    for label in labels:
        item = by_key[label.trajectory_key].get(label.item_id)
        if item is None or item.method != "judge":
            skipped.append(f"{label.source}: {label.item_id!r} is not a judge item of rubric {rubric.id}")
            continue
        if item.status == "unmet" and item.probability is None:   # decided without the judge: nothing to judge
            judged.append(Judged(label, 0.0, None, no_evidence=True))
            continue
        judged.append(Judged(label, item.probability, item.error if item.status == "error" else None,
                             tuple(item.members or ())))
    return judged, skipped


def panel_report(judged: Sequence[Judged]) -> dict[str, Any] | None:
    """For a panel judge: the members' agreement with one another (Fleiss' kappa) and each member's own agreement
    with the labels; None when the judge was not a panel."""
    from dataclasses import asdict

    from rubrics.judges.panel.agreement import panel_agreement

    among = panel_agreement(j.members for j in judged)
    if among is None:
        return None
    members = {}
    for index, name in enumerate(among.members):
        alone = [Judged(j.label, j.members[index].probability if len(j.members) > index else None, None)
                 for j in judged]
        members[name] = asdict(evaluate(alone).overall)
    return {"agreement": asdict(among), "members": members}


def agreement(pairs: Iterable[tuple[bool, float | None]], threshold: float | dict | None = None) -> Agreement:
    """Metrics over (human label, judge probability) pairs; None probabilities are judge errors."""
    pairs = list(pairs)
    scored = [(y, p) for y, p in pairs if p is not None]
    errors = len(pairs) - len(scored)
    if not scored:
        return Agreement(0, errors, 0, None, None, None, None)
    cut = 0.5 if threshold is None else threshold
    predicted = [p >= cut for _, p in scored]
    truth = [y for y, _ in scored]
    n = len(scored)
    tp = sum(1 for t, q in zip(truth, predicted) if t and q)
    tn = sum(1 for t, q in zip(truth, predicted) if not t and not q)
    positives = sum(truth)
    negatives = n - positives
    accuracy = (tp + tn) / n
    rates = ([tp / positives] if positives else []) + ([tn / negatives] if negatives else [])
    balanced = sum(rates) / len(rates)
    brier = sum((p - float(y)) ** 2 for y, p in scored) / n
    return Agreement(n, errors, positives, accuracy, balanced, cohen_kappa(truth, predicted), brier)


def cohen_kappa(truth: Sequence[bool], predicted: Sequence[bool]) -> float | None:
    n = len(truth)
    observed = sum(1 for t, q in zip(truth, predicted) if t == q) / n
    p_true, p_pred = sum(truth) / n, sum(predicted) / n
    expected = p_true * p_pred + (1 - p_true) * (1 - p_pred)
    if expected >= 1.0:
        return None  # both raters constant: kappa is undefined
    return (observed - expected) / (1 - expected)


def evaluate(judged: Sequence[Judged], thresholds: dict[str, float] | None = None,
             default_threshold: float = 0.5) -> EvalReport:
    thresholds = dict(thresholds or {})
    items = list(dict.fromkeys(j.item_id for j in judged))
    used = {item: thresholds.get(item, default_threshold) for item in items}
    per_item = {item: agreement([(j.label.met, j.probability) for j in judged if j.item_id == item], used[item])
                for item in items}
    overall = _pooled(judged, used)
    return EvalReport(overall, per_item, used)


def _pooled(judged: Sequence[Judged], thresholds: dict[str, float]) -> Agreement:
    # Pool verdicts (not probabilities) so that each item is counted with its own threshold; the Brier score
    # stays on the raw probabilities.
    verdicts = [(j.label.met, None if j.probability is None else (1.0 if j.probability >= thresholds[j.item_id]
                                                                     else 0.0)) for j in judged]
    counted = agreement(verdicts, 0.5)
    raw = agreement([(j.label.met, j.probability) for j in judged])
    return replace(counted, brier=raw.brier)


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
    from rubrics.judges.logistic import fit_logistic, logit

    scored = [j for j in judged if j.probability is not None and not j.no_evidence]
    if not scored:
        raise ValueError("no judged labels to fit a calibration on")
    return Calibration(*fit_logistic([logit(j.probability) for j in scored], [j.label.met for j in scored]))


def recalibrated(judged: Sequence[Judged], calibration: Calibration) -> list[Judged]:
    """The judgments (made with the identity calibration) with probabilities calibration.probability(raw)."""
    from rubrics.judges.logistic import logit

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


def by_difficulty(judged: Sequence[Judged]) -> dict[str, Agreement]:
    """Agreement over the clear labels, the hard ones, and all (labels without a difficulty count in all only)."""
    groups = {"clear": [j for j in judged if j.label.difficulty == "clear"],
              "hard": [j for j in judged if j.label.difficulty == "hard"], "all": list(judged)}
    return {name: agreement([(j.label.met, j.probability) for j in group]) for name, group in groups.items()}


def ranked_pairs(judged: Sequence[Judged], difficulty: str | None = "clear") -> float | None:
    """Over pairs of judgments of the same item (same domain), one labelled met and one unmet, both of the given
    difficulty: the share where the met one has the higher probability (ties count half). None without pairs."""
    groups: dict[tuple[str, str], list[Judged]] = {}
    for j in judged:
        if j.probability is not None and (difficulty is None or j.label.difficulty == difficulty):
            groups.setdefault((j.label.domain, j.item_id), []).append(j)
    wins = total = 0.0
    for group in groups.values():
        for met in (j for j in group if j.label.met):
            for unmet in (j for j in group if not j.label.met):
                total += 1
                wins += 1.0 if met.probability > unmet.probability else 0.5 if met.probability == unmet.probability \
                    else 0.0
    return wins / total if total else None


def summary(judged: Sequence[Judged]) -> dict[str, Any]:
    from dataclasses import asdict

    return {"by_difficulty": {k: asdict(v) for k, v in by_difficulty(judged).items()},
            "clear_pairs_ranked": ranked_pairs(judged)}


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


def report_dict(report: EvalReport) -> dict[str, Any]:
    from dataclasses import asdict

    return {"overall": asdict(report.overall), "per_item": {k: asdict(v) for k, v in report.per_item.items()},
            "thresholds": report.thresholds}


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.2f}"


def render_report(title: str, report: dict[str, Any]) -> str:
    lines = [title, f"  {'item':<22} {'n':>4} {'pos':>4} {'err':>4}  {'acc':>5} {'bal':>5} {'kappa':>5} "
                    f"{'brier':>5} {'thr':>5}"]
    rows = list(report["per_item"].items()) + [("OVERALL", report["overall"])]
    for name, a in rows:
        threshold = report["thresholds"].get(name)
        lines.append(f"  {name:<22} {a['n']:>4} {a['positives']:>4} {a['errors']:>4}  {_fmt(a['accuracy'])} "
                     f"{_fmt(a['balanced_accuracy'])} {_fmt(a['kappa'])} {_fmt(a['brier'])} {_fmt(threshold)}")
    return "\n".join(lines) + "\n"


def _agreement_row(name: str, a: dict[str, Any], pairs: float | None = None) -> str:
    return (f"  {name:<34} {a['n']:>4} {a['positives']:>4} {a['errors']:>4}  {_fmt(a['accuracy'])} "
            f"{_fmt(a['balanced_accuracy'])} {_fmt(a['kappa'])} {_fmt(a['brier'])} {_fmt(pairs)}")


def render_domain_report(output: dict[str, Any]) -> str:
    cv = output["cross_validation"]
    header = (f"  {'calibration / labels':<34} {'n':>4} {'pos':>4} {'err':>4}  {'acc':>5} {'bal':>5} {'kappa':>5} "
              f"{'brier':>5} {'pairs':>5}")
    lines = ["calibration fitted leaving each domain out (the headline: what a new rubric gets), in-sample, and as"
             " shipped", "(pairs: clear same-item pairs where the met one has the higher probability)", header]
    shipped = output["as_shipped"]
    for title, block in (("held-out domain", cv["leave_one_domain_out"]), ("in-sample", cv["in_sample"]),
                         ("as shipped", shipped)):
        for difficulty in ("clear", "hard", "all"):
            pairs = block["clear_pairs_ranked"] if difficulty == "clear" else None
            lines.append(_agreement_row(f"{title}: {difficulty}", block["by_difficulty"][difficulty], pairs))
    lines.append("held-out figures per domain (clear labels):")
    for domain, block in cv["leave_one_domain_out"]["per_domain"].items():
        lines.append(_agreement_row(domain, block["by_difficulty"]["clear"], block["clear_pairs_ranked"]))
    for name, fit in cv["in_sample"]["fits"].items():
        lines.append(f"in-sample fit of {name}: scale = {fit['scale']:.4f}  offset = {fit['offset']:.4f}")
    return "\n".join(lines) + "\n"


def render_panel(panel: dict[str, Any]) -> str:
    from rubrics.judges.panel.agreement import PanelAgreement, describe

    lines = [describe(PanelAgreement(**panel["agreement"])), "each member alone against the labels:"]
    lines += [_agreement_row(name, a) for name, a in panel["members"].items()]
    return "\n".join(lines) + "\n"


def render(output: dict[str, Any]) -> str:
    parts = [f"judge: {output['judge']}   labels judged: {output['labels']}\n"]
    if "panel" in output:
        parts.append(render_panel(output["panel"]))
    for name, c in output.get("calibration", {}).items():
        parts.append(f"{name} calibration (logistic fit, in-sample): scale = {c['scale']:.4f}  "
                     f"offset = {c['offset']:.4f}\n")
    parts.append(render_report("agreement with the labels" + (" (calibrated in-sample)"
                                                               if "calibration" in output else ""),
                               output["report"]))
    if "fitted_thresholds" in output:
        parts.append(render_report("with fitted per-item thresholds (in-sample, optimistic)",
                                   output["report_with_fitted_thresholds"]))
        parts.append(render_report("with thresholds fitted leaving each trajectory out (honest estimate)",
                                   output["leave_one_trajectory_out"]))
        parts.append("proposed thresholds (item: threshold):\n" + "".join(
            f"  {k}: {v:.3f}\n" for k, v in output["fitted_thresholds"].items()))
    if "cross_validation" in output:
        parts.append(render_domain_report(output))
    if "engine" in output:
        parts.append("engine: " + ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in output["engine"].items()) + "\n")
    return "\n".join(parts)
