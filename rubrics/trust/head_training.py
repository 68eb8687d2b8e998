"""Training a verdict head on labels (`rubric judge-train`).

1. Features: every labelled judgment is judged once by the embedded judge with the head method's prompt (the
   choice prompt) and a probe of candidate layers; the engine hands back each layer's hidden state at the answer
   position, and the choice raw score comes with it. A label whose evidence is empty is decided without the
   judge and has no features (nor does it need a head: it is unmet whatever the head says).
2. Fit: logistic regression on the standardised features (hidden state of one layer, choice raw score), mean
   log-loss plus weight_decay / 2 * |w|^2 (the bias unpenalised), by L-BFGS in float64 from zero.
3. Selection: the layer and the weight decay with the lowest out-of-fold log-loss, the folds made of whole
   training domains (a head must work on domains it never saw); then one fit on every label.
Everything is deterministic: the same labels and model give the same head, bit for bit.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubrics.trust.labels import Judged, Label, judge_labels
from rubrics.judges.protocol import JudgeRequest, Verdict
from rubrics.rubric.compiler import part_id

# The first head of the 135M model chose 1.0, the grid's end, at every training size: the grid goes on to 100.
WEIGHT_DECAYS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0, 10.0, 30.0, 100.0)
MAX_FOLDS = 5
LAYER_FRACTIONS = (0.5, 0.67, 0.83, 1.0)   # candidate layers, as fractions of the model's depth


@dataclass(frozen=True)
class Example:
    """One labelled judgment's features: the probe layers' hidden states at the answer position and the choice
    method's raw score (log P(Yes) - log P(No))."""
    label: Label
    hidden: Any            # float32 tensor [probe layers, hidden size]
    choice_raw: float


@dataclass(frozen=True)
class Fit:
    layer: int             # the model layer (an index into the probe's layers is not kept)
    weight_decay: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def logits(self, x: Any) -> Any:
        import torch

        standardised = (x - torch.tensor(self.mean, dtype=torch.float64)) / torch.tensor(self.scale,
                                                                                         dtype=torch.float64)
        return standardised @ torch.tensor(self.weights, dtype=torch.float64) + self.bias


@dataclass(frozen=True)
class Selection:
    fit: Fit
    cross_validated: dict[tuple[int, float], float]   # (layer, weight decay) -> out-of-fold mean log-loss
    folds: tuple[tuple[str, ...], ...]


def candidate_layers(num_layers: int) -> tuple[int, ...]:
    return tuple(sorted({max(1, min(num_layers, round(num_layers * f))) for f in LAYER_FRACTIONS}))


class _FeatureJudge:
    """Judges with the embedded judge's head probe and keeps what each request measured, by (trajectory id,
    item id); its verdicts are the choice method's, uncalibrated."""

    def __init__(self, embedded: Any):
        self.embedded = embedded
        self.name = embedded.name
        self.measured: dict[tuple[str, str], Any] = {}

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        from rubrics.judges.fitted.logistic import sigmoid

        verdicts = []
        for request, measured in zip(requests, self.embedded.measure(requests)):
            self.measured[(request.context.trajectory_id, request.item.id)] = measured
            if isinstance(measured, str):
                verdicts.append(Verdict(met=None, probability=None, error=measured))
            else:
                yes, no = measured[0].logprobs
                verdicts.append(Verdict(met=yes >= no, probability=sigmoid(yes - no)))
        return verdicts


def extract_examples(labelled: Sequence[tuple[Sequence[Label], Any]], embedded: Any
                     ) -> tuple[list[Example], list[str]]:
    """Features of every label of every (labels, rubric) pair; the embedded judge must carry a HeadProbe (its
    method head). Also the reasons labels were left out (not a judge item, no evidence, a judge error)."""
    examples, left_out = [], []
    for labels, rubric in labelled:
        recorder = _FeatureJudge(embedded)
        judged, skipped = judge_labels(labels, rubric, recorder)
        left_out += skipped
        for pair in judged:
            examples_or_reason = _example(pair, recorder.measured)
            if isinstance(examples_or_reason, str):
                left_out.append(f"{pair.label.source}: {examples_or_reason}")
            else:
                examples.append(examples_or_reason)
    return examples, left_out


def _example(pair: Judged, measured: dict[tuple[str, str], Any]) -> Example | str:
    if pair.no_evidence:
        return "no evidence to judge (decided without the judge)"
    found = measured.get((pair.label.trajectory.id, pair.label.item_id))
    if found is None and (pair.label.trajectory.id, part_id(pair.label.item_id, 1)) in measured:
        return "judged part by part (its parts: under `judge: parts:`); a head reads one question per item"
    if found is None or isinstance(found, str):
        return f"the judge could not judge it: {found or pair.error}"
    yes, no = found[0].logprobs
    return Example(pair.label, found[0].hidden, yes - no)


def feature_matrix(examples: Sequence[Example], probe_index: int) -> Any:
    """[examples, hidden size + 1] float64: one probe layer's states and the choice raw score."""
    import torch

    hidden = torch.stack([e.hidden[probe_index] for e in examples]).to(torch.float64)
    choice = torch.tensor([[e.choice_raw] for e in examples], dtype=torch.float64)
    return torch.cat([hidden, choice], dim=1)


def fit_logistic_regression(x: Any, y: Any, weight_decay: float, layer: int) -> Fit:
    """x: [n, d] float64, y: [n] float64 of 0/1."""
    import torch

    mean = x.mean(dim=0)
    scale = x.std(dim=0, unbiased=False)
    scale = torch.where(scale > 1e-8, scale, torch.ones_like(scale))
    z = (x - mean) / scale
    weights = torch.zeros(z.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS([weights, bias], lr=1.0, max_iter=500, tolerance_grad=1e-10,
                                  tolerance_change=1e-14, history_size=20, line_search_fn="strong_wolfe")

    def loss() -> Any:
        optimiser.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(z @ weights + bias, y) \
            + 0.5 * weight_decay * (weights @ weights)
        value.backward()
        return value

    optimiser.step(loss)
    return Fit(layer, weight_decay, tuple(mean.tolist()), tuple(scale.tolist()), tuple(weights.detach().tolist()),
               float(bias.detach()[0]))


def domain_folds(domains: Sequence[str], folds: int = MAX_FOLDS) -> tuple[tuple[str, ...], ...]:
    """Whole domains dealt round-robin, in sorted order, into min(folds, domains) folds."""
    ordered = sorted(set(domains))
    count = min(folds, len(ordered))
    return tuple(tuple(ordered[i::count]) for i in range(count))


def select_and_fit(examples: Sequence[Example], probe_layers: Sequence[int],
                   weight_decays: Sequence[float] = WEIGHT_DECAYS) -> Selection:
    """The layer and weight decay by out-of-fold log-loss over folds of whole domains, then the fit on all."""
    import torch

    if len({e.label.met for e in examples}) < 2:
        raise ValueError("a head needs met and unmet labels")
    domains = [e.label.domain for e in examples]
    folds = domain_folds(domains)
    if len(folds) < 2:
        raise ValueError("a head needs labels from 2 domains or more (its weight decay is chosen leaving domains "
                         "out)")
    y = torch.tensor([float(e.label.met) for e in examples], dtype=torch.float64)
    scores: dict[tuple[int, float], float] = {}
    for probe_index, layer in enumerate(probe_layers):
        x = feature_matrix(examples, probe_index)
        for decay in weight_decays:
            losses = []
            for fold in folds:
                held = torch.tensor([d in fold for d in domains])
                fit = fit_logistic_regression(x[~held], y[~held], decay, layer)
                losses.append(torch.nn.functional.binary_cross_entropy_with_logits(
                    fit.logits(x[held]), y[held], reduction="sum"))
            scores[(layer, decay)] = float(sum(losses)) / len(examples)
    # lowest loss; on a tie the stronger decay, then the earlier layer
    layer, decay = min(scores, key=lambda key: (scores[key], -key[1], key[0]))
    x = feature_matrix(examples, list(probe_layers).index(layer))
    return Selection(fit_logistic_regression(x, y, decay, layer), scores, folds)


def head_probabilities(fit: Fit, examples: Sequence[Example], probe_layers: Sequence[int]) -> list[float]:
    """The fitted head's probability for each example (whose probe holds the fit's layer)."""
    from rubrics.judges.fitted.logistic import sigmoid

    x = feature_matrix(examples, list(probe_layers).index(fit.layer))
    return [sigmoid(v) for v in fit.logits(x).tolist()]


def as_head(fit: Fit, identity: Any, examples: Sequence[Example]) -> Any:
    from rubrics.judges.fitted.verdict_head import VerdictHead

    return VerdictHead(identity, fit.layer, fit.mean, fit.scale, fit.weights, fit.bias,
                       tuple(sorted({e.label.domain for e in examples})), len(examples), fit.weight_decay)


def log_loss(probabilities: Sequence[float], labels: Sequence[bool]) -> float:
    eps = 1e-12
    return -sum(math.log(max(p, eps)) if y else math.log(max(1 - p, eps))
                for p, y in zip(probabilities, labels)) / len(labels)
