"""Agreement of judgments with their labels: accuracy, balanced accuracy, Cohen's kappa, the Brier score and the
area under the ROC curve, per item and overall; by label difficulty; the share of same-item pairs ranked right; a panel's members. Metrics are
computed over the evaluated labels; judge errors are counted apart.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rubrics.trust.labels import Judged


@dataclass(frozen=True)
class Agreement:
    n: int
    errors: int
    positives: int
    accuracy: float | None
    balanced_accuracy: float | None
    kappa: float | None
    brier: float | None
    auc: float | None = None   # how often a met judgment outranks an unmet one; threshold- and calibration-free


@dataclass
class EvalReport:
    overall: Agreement
    per_item: dict[str, Agreement]
    thresholds: dict[str, float]  # the thresholds the verdicts were counted with
    skipped: list[str] = field(default_factory=list)  # labels on items that are not judge items, or unknown


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
    return Agreement(n, errors, positives, accuracy, balanced, cohen_kappa(truth, predicted), brier,
                     roc_auc(scored))


def roc_auc(scored: Sequence[tuple[bool, float]]) -> float | None:
    """The Mann-Whitney form: over every (met, unmet) pair, the share where the met one has the higher probability,
    ties counting half; from ranks, so n log n. None when one class is absent."""
    positives = sum(1 for y, _ in scored if y)
    negatives = len(scored) - positives
    if not positives or not negatives:
        return None
    ordered = sorted(p for _, p in scored)
    rank_sum = 0.0
    for y, p in scored:
        if y:   # the midrank of p among all probabilities (1-based), which gives ties half
            below, through = bisect_left(ordered, p), bisect_right(ordered, p)
            rank_sum += (below + 1 + through) / 2
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


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
    return replace(counted, brier=raw.brier, auc=raw.auc)


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


def near_miss_pairs_ranked(judged: Sequence[Judged]) -> float | None:
    """Over pairs of judgments of the same item (same domain), one labelled met and one a near miss (unmet, though
    the work addresses the criterion): the share where the met one has the higher probability (ties count half).
    The pairs a group of attempts must get right for a reward a near miss cannot game. None without pairs."""
    groups: dict[tuple[str, str], list[Judged]] = {}
    for j in judged:
        if j.probability is not None and (j.label.met or j.label.near_miss):
            groups.setdefault((j.label.domain, j.item_id), []).append(j)
    wins = total = 0.0
    for group in groups.values():
        for met in (j for j in group if j.label.met):
            for near in (j for j in group if j.label.near_miss):
                total += 1
                wins += 1.0 if met.probability > near.probability else 0.5 if met.probability == near.probability \
                    else 0.0
    return wins / total if total else None


def near_misses_caught(judged: Sequence[Judged]) -> tuple[float | None, int]:
    """Over the labels marked near_miss (unmet, though the work addresses the criterion): the share the judge calls
    unmet (probability below 0.5; a judge error counts as not caught), and how many there are."""
    near = [j for j in judged if j.label.near_miss]
    caught = sum(1 for j in near if j.error is None and j.probability is not None and j.probability < 0.5)
    return (caught / len(near) if near else None), len(near)


def summary(judged: Sequence[Judged]) -> dict[str, Any]:
    from dataclasses import asdict

    caught, near = near_misses_caught(judged)
    return {"by_difficulty": {k: asdict(v) for k, v in by_difficulty(judged).items()},
            "clear_pairs_ranked": ranked_pairs(judged), "near_miss_pairs_ranked": near_miss_pairs_ranked(judged),
            "near_misses": near, "near_misses_caught": caught}


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


def report_dict(report: EvalReport) -> dict[str, Any]:
    from dataclasses import asdict

    return {"overall": asdict(report.overall), "per_item": {k: asdict(v) for k, v in report.per_item.items()},
            "thresholds": report.thresholds}
