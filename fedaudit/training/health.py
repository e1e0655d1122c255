"""Training-health checks whose failure a user should hear about before the audit runs.

:func:`chance_level_warning`: a global model whose test accuracy, after a few rounds, is
no better than always predicting the most frequent test class.  "No better" allows for
sampling noise: with n test samples and majority-class frequency p0, a classifier of true
accuracy p0 scores above p0 + 3 sqrt(p0 (1 - p0) / n) with probability about 0.1%
(normal approximation to the binomial), so an accuracy at or below that bound is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedaudit.scenario import TrainConfig

#: the first round after which the check runs (earlier rounds may still be warming up)
CHECK_FROM_ROUND = 3
NOISE_SIGMAS = 3.0


@dataclass(frozen=True)
class ChanceLevel:
    chance: float  # majority-class frequency of the test labels
    bound: float  # chance + NOISE_SIGMAS binomial standard errors


def chance_level(y_test: np.ndarray) -> ChanceLevel:
    """The accuracy of always predicting the majority test class, and its noise bound;
    for sequences, y_test (N, L), over every target token (the accuracy a text run
    reports is per token: always predicting the most frequent character)."""
    y = np.asarray(y_test)
    if y.ndim == 2:
        y = y.ravel()
    if y.ndim != 1 or len(y) == 0:
        raise ValueError(f"y_test must be a non-empty 1-D array (or (N, L) targets), got "
                         f"shape {y.shape}")
    p0 = float(np.bincount(y).max() / len(y))
    return ChanceLevel(p0, p0 + NOISE_SIGMAS * math.sqrt(p0 * (1 - p0) / len(y)))


def chance_level_warning(round_: int, rounds: int, accuracy: float, y_test: np.ndarray,
                         train: TrainConfig, failures: int = 0, *,
                         membership: bool = True) -> str | None:
    """A one-line warning when the global model is still at chance level after round
    ``min(CHECK_FROM_ROUND, rounds)``; None otherwise (and before that round).  It names
    the membership attacks as what it concerns when the run has them (``membership``):
    the attacks on the clients' updates (a one-step reconstruction scenario is untrained
    on purpose) do not need a trained model."""
    if round_ < min(CHECK_FROM_ROUND, rounds):
        return None
    level = chance_level(y_test)
    if math.isfinite(accuracy) and accuracy > level.bound:
        return None
    causes = (f"train.lr = {train.lr:g}"
              + (f" with train.momentum = {train.momentum:g}" if train.optimizer == "sgd"
                 else f" ({train.optimizer})")
              + " (too high diverges, too low stalls), or data not scaled to [0, 1]")
    if failures:
        causes += f"; {failures} client replies were rejected in this round (see run.log)"
    return (f"the global model is at chance level after round {round_}: test accuracy "
            f"{accuracy:.3f}, always predicting the majority class gives {level.chance:.3f} "
            f"(noise bound {level.bound:.3f})"
            + ("; membership attacks on it mean little (attacks on the clients' updates do "
               "not need a trained model)" if membership else "")
            + f". Likely causes: {causes}")
