"""The logistic function, its inverse, and the hand-written logistic fit that every method's calibration uses."""
from __future__ import annotations

import math
import random

import pytest

from rubrics.judges.fitted import logistic
from rubrics.judges.methods import IDENTITY, Calibration


def test_sigmoid_and_logit_are_inverse_and_stable():
    for p in (1e-9, 0.2, 0.5, 0.97):
        assert logistic.sigmoid(logistic.logit(p)) == pytest.approx(p, rel=1e-9)
    assert logistic.sigmoid(-800.0) == 0.0 and logistic.sigmoid(800.0) == 1.0


def test_calibration_probability_is_monotone_and_centred_by_the_offset():
    assert Calibration(scale=2.0, offset=0.0).probability(0.0) == pytest.approx(0.5)
    assert Calibration(scale=4.0, offset=1.0).probability(-0.25) == pytest.approx(0.5)
    values = [Calibration(1.9749, -0.3215).probability(x) for x in (-2, -1, 0, 1, 2)]
    assert values == sorted(values) and values[0] < values[-1]
    # the identity calibration is the plain logistic function of the raw score
    assert (IDENTITY.scale, IDENTITY.offset) == (1.0, 0.0)
    assert IDENTITY.probability(0.7) == pytest.approx(logistic.sigmoid(0.7))


def test_logistic_fit_recovers_known_parameters():
    rng = random.Random(7)
    true_scale, true_offset = 2.5, -0.8
    xs = [rng.uniform(-3, 3) for _ in range(4000)]
    ys = [rng.random() < logistic.sigmoid(true_scale * x + true_offset) for x in xs]
    scale, offset = logistic.fit_logistic(xs, ys, l2=0.0)
    assert scale == pytest.approx(true_scale, abs=0.25)
    assert offset == pytest.approx(true_offset, abs=0.2)


def test_logistic_fit_stays_finite_on_separable_labels():
    scale, offset = logistic.fit_logistic([-2.0, -1.0, 1.0, 2.0], [False, False, True, True])
    assert math.isfinite(scale) and math.isfinite(offset) and scale > 0


def test_logistic_fit_rejects_mismatched_input():
    with pytest.raises(ValueError):
        logistic.fit_logistic([1.0], [True, False])
    with pytest.raises(ValueError):
        logistic.fit_logistic([], [])
