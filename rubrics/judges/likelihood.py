"""The likelihood verdict: how much the evidence raises the probability of the item written as a statement.

Small models answer yes/no questions near chance but still read evidence: the log-probability of "The agent's
work flags the expenses approved without sign-off." rises when the evidence does that. The raw log-probability
also measures how common the words are (surface form competition, Holtzman et al. 2021), so the verdict uses the
pointwise mutual information against a content-free evidence ("N/A" in every fence, same task and item):

    pmi = (log P(statement | evidence) - log P(statement | content-free)) / tokens(statement)
    probability = sigmoid(SCALE * pmi + OFFSET)

Per-token normalisation keeps long and short statements on one scale. The content-free prompt is the same for
every trajectory of a rubric, so the engine computes it once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Fitted by logistic regression (fit_logistic below) of the human label on pmi, over the 130 labelled judgments
# of the shipped labeled sets, with the embedded SmolLM2-135M-Instruct (float32, CPU), by:
#     rubric judge-eval examples/labels/cfo-mis/labels.jsonl examples/labels/invoice-fix/labels.jsonl \
#         --rubric examples/cfo-mis/rubric.yaml --rubric examples/invoice-fix/rubric.yaml \
#         --method likelihood --fit-calibration
# which prints SCALE and OFFSET. Refit when the prompt layout, the statement form or the model changes.
# (Refitted when each prompt segment became one encoded string, ids as a server tokenizes the chat: it was
# 2.4344 / -0.3984 with the piece-by-piece encoding.)
SCALE = 1.9749
OFFSET = -0.3215


def pmi_per_token(evidence_logprob: float, baseline_logprob: float, tokens: int) -> float:
    return (evidence_logprob - baseline_logprob) / max(1, tokens)


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def logit(p: float, eps: float = 1e-12) -> float:
    p = min(max(p, eps), 1.0 - eps)
    return math.log(p / (1.0 - p))


def probability(pmi: float, scale: float = SCALE, offset: float = OFFSET) -> float:
    return sigmoid(scale * pmi + offset)


def fit_logistic(xs: Sequence[float], ys: Sequence[bool], l2: float = 1e-2, steps: int = 50) -> tuple[float, float]:
    """(scale, offset) maximising the log-likelihood of ys under sigmoid(scale * x + offset), by Newton's method.

    A small L2 penalty on the scale keeps the fit finite when the classes separate perfectly (a few labels).
    """
    if not xs or len(xs) != len(ys):
        raise ValueError("fit_logistic needs as many labels as scores, and at least one")
    a, b = 0.0, 0.0
    for _ in range(steps):
        ga, gb, haa, hab, hbb = -l2 * a, 0.0, l2, 0.0, 1e-9
        for x, y in zip(xs, ys):
            p = sigmoid(a * x + b)
            r = float(y) - p
            w = p * (1.0 - p)
            ga += r * x
            gb += r
            haa += w * x * x
            hab += w * x
            hbb += w
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        a, b = a + da, b + db
        if abs(da) < 1e-10 and abs(db) < 1e-10:
            break
    return a, b
