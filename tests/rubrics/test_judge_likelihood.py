"""The likelihood method's maths: pmi per token, the calibration map, and the hand-written logistic fit."""
from __future__ import annotations

import math
import random

import pytest

from rubrics.judges import likelihood


def test_pmi_is_the_per_token_gain_over_the_content_free_baseline():
    assert likelihood.pmi_per_token(-10.0, -16.0, 4) == pytest.approx(1.5)
    assert likelihood.pmi_per_token(-16.0, -10.0, 3) == pytest.approx(-2.0)


def test_probability_is_monotone_and_centred_by_the_offset():
    assert likelihood.probability(0.0, scale=2.0, offset=0.0) == pytest.approx(0.5)
    assert likelihood.probability(-0.25, scale=4.0, offset=1.0) == pytest.approx(0.5)
    values = [likelihood.probability(x) for x in (-2, -1, 0, 1, 2)]
    assert values == sorted(values) and values[0] < values[-1]


def test_sigmoid_and_logit_are_inverse_and_stable():
    for p in (1e-9, 0.2, 0.5, 0.97):
        assert likelihood.sigmoid(likelihood.logit(p)) == pytest.approx(p, rel=1e-9)
    assert likelihood.sigmoid(-800.0) == 0.0 and likelihood.sigmoid(800.0) == 1.0


def test_logistic_fit_recovers_known_parameters():
    rng = random.Random(7)
    true_scale, true_offset = 2.5, -0.8
    xs = [rng.uniform(-3, 3) for _ in range(4000)]
    ys = [rng.random() < likelihood.sigmoid(true_scale * x + true_offset) for x in xs]
    scale, offset = likelihood.fit_logistic(xs, ys, l2=0.0)
    assert scale == pytest.approx(true_scale, abs=0.25)
    assert offset == pytest.approx(true_offset, abs=0.2)


def test_logistic_fit_stays_finite_on_separable_labels():
    scale, offset = likelihood.fit_logistic([-2.0, -1.0, 1.0, 2.0], [False, False, True, True])
    assert math.isfinite(scale) and math.isfinite(offset) and scale > 0


def test_logistic_fit_rejects_mismatched_input():
    with pytest.raises(ValueError):
        likelihood.fit_logistic([1.0], [True, False])
