"""The baseline attacks (attacks/membership/baselines.py) by hand, their orientation, and
through the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attacks import Oracle, get_attack
from attacks.membership.baselines import (
    confidence_scores,
    entropy_scores,
    loss_scores,
    mentropy_scores,
)

from tests.attacks.stubs import LookupModel, P, Y, index_inputs


EPS = 1e-30
log = math.log


def test_baselines_by_hand():
    expected_loss = [log(0.5), log(0.8), log(0.1), log(EPS)]
    expected_conf = [0.5, 0.8, 0.1, 0.0]
    expected_entropy = [
        0.5 * log(0.5) + 0.25 * log(0.25) + 0.25 * log(0.25),
        0.1 * log(0.1) + 0.8 * log(0.8) + 0.1 * log(0.1),
        0.7 * log(0.7) + 0.2 * log(0.2) + 0.1 * log(0.1),
        0.0,  # 1 * log 1 + 0 + 0
    ]
    # -Mentr = (1 - p_y) log p_y + sum_{i != y} p_i log(1 - p_i)
    expected_mentropy = [
        0.5 * log(0.5) + 0.25 * log(0.75) + 0.25 * log(0.75),
        0.2 * log(0.8) + 0.1 * log(0.9) + 0.1 * log(0.9),
        0.9 * log(0.1) + 0.7 * log(0.3) + 0.2 * log(0.8),
        1.0 * log(EPS) + 1.0 * log(EPS) + 0.0,  # log 0 -> log eps twice
    ]
    np.testing.assert_allclose(loss_scores(P, Y), expected_loss, rtol=1e-12)
    np.testing.assert_allclose(confidence_scores(P, Y), expected_conf, rtol=1e-12)
    np.testing.assert_allclose(entropy_scores(P), expected_entropy, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(mentropy_scores(P, Y), expected_mentropy, rtol=1e-12)
    for fn in (loss_scores, mentropy_scores):
        assert np.all(np.isfinite(fn(P, Y)))


def test_baselines_orientation():
    # a confident correct prediction (member-like) outranks an unsure one
    proba = np.array([[0.98, 0.01, 0.01], [0.4, 0.35, 0.25]])
    y = np.array([0, 0])
    for scores in (
        loss_scores(proba, y),
        confidence_scores(proba, y),
        entropy_scores(proba),
        mentropy_scores(proba, y),
    ):
        assert scores[0] > scores[1]
    # unlike entropy, mentropy penalises a confident mistake
    wrong = np.array([[0.01, 0.98, 0.01]])
    assert mentropy_scores(wrong, [0])[0] < mentropy_scores(proba[1:], [0])[0]
    assert entropy_scores(wrong)[0] > entropy_scores(proba[1:])[0]


def test_baseline_attacks_through_the_oracle():
    oracle = Oracle(LookupModel(P), batch_size=3)
    x = index_inputs(len(P))
    pure = {
        "loss": loss_scores(P, Y),
        "confidence": confidence_scores(P, Y),
        "entropy": entropy_scores(P),
        "mentropy": mentropy_scores(P, Y),
    }
    for name, expected in pure.items():
        before = oracle.queries
        np.testing.assert_allclose(get_attack(name)(oracle, x, Y), expected, rtol=1e-12)
        assert oracle.queries - before == len(P)  # one query per sample


def test_baselines_validation():
    with pytest.raises(ValueError, match="y must lie in"):
        loss_scores(P, [0, 1, 3, 0])
    with pytest.raises(ValueError, match="one label per sample"):
        mentropy_scores(P, [0, 1])
    with pytest.raises(ValueError, match="integer class labels"):
        confidence_scores(P, [0.0, 1.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="proba must be 2-D"):
        entropy_scores(P[0])
    with pytest.raises(ValueError, match="eps"):
        loss_scores(P, Y, eps=0.0)
