"""The chance-level warning: hand-computed bounds (a run that cannot learn, lr = 10:
tests/e2e/test_health_runs.py)."""

import dataclasses
import math

import numpy as np
import pytest

from fedaudit.config import validate
from fedaudit.training.health import chance_level, chance_level_warning


TRAIN = dataclasses.replace(validate({}).train, lr=10.0, momentum=0.9, optimizer="sgd")


def test_chance_level_is_the_majority_class_plus_three_standard_errors():
    y = np.array([0] * 50 + [1] * 30 + [2] * 20)  # p0 = 0.5, n = 100
    level = chance_level(y)
    assert level.chance == 0.5
    assert level.bound == pytest.approx(0.5 + 3 * math.sqrt(0.25 / 100))  # 0.65
    with pytest.raises(ValueError, match="non-empty 1-D"):
        chance_level(np.array([], dtype=int))


def test_warning_only_from_round_3_and_only_at_chance():
    y = np.array([0] * 50 + [1] * 30 + [2] * 20)
    assert chance_level_warning(2, 10, 0.5, y, TRAIN) is None  # too early
    msg = chance_level_warning(3, 10, 0.5, y, TRAIN, failures=2)
    assert "chance level after round 3" in msg and "train.lr = 10" in msg
    assert "train.momentum = 0.9" in msg and "2 client replies were rejected" in msg
    assert chance_level_warning(3, 10, 0.65, y, TRAIN) is not None  # at the bound
    assert chance_level_warning(3, 10, 0.66, y, TRAIN) is None  # above it
    assert chance_level_warning(3, 10, float("nan"), y, TRAIN) is not None
    assert chance_level_warning(1, 1, 0.5, y, TRAIN) is not None  # a 1-round run: its last
    assert "(adam)" in chance_level_warning(3, 5, 0.5, y, dataclasses.replace(TRAIN, optimizer="adam"))
    # it names what it concerns: the membership attacks, when the run has them
    assert "membership attacks on it mean little" in msg
    quiet = chance_level_warning(3, 10, 0.5, y, TRAIN, membership=False)
    assert "attacks" not in quiet and quiet.endswith("or data not scaled to [0, 1]")
