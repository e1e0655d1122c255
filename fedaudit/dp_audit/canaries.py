"""The canaries of a one-run DP audit and the auditor's guesses.

Client level (``dp-client``, ``dp-server``, ``clip``): ``m`` canary clients, each taking
part in the whole run with probability 1/2 (:func:`draw_inclusion`); canary j's update is
``clip_norm * canary_direction(seed, j, dim)``, a fixed random unit vector over the
model's floating-point entries (seeded per canary, so the server and the auditor
regenerate it instead of storing m x dim numbers).  The auditor's score of canary j is
the sum over rounds of <global_t - global_{t-1}, direction_j> (:func:`direction_scores`).

Sample level (``dp-sgd``, no defense): :func:`draw_sample_canaries` takes ``m`` samples of
the holdout split (never trained on otherwise, and removed from the attacks' non-member
pool), gives each a uniformly random WRONG label -- a mislabeled sample is the
strongest signal a black-box loss attack can get (its loss is high unless it was trained
on), the common choice of auditing papers -- and includes each one independently with
probability 1/2 in the data of a uniformly random client.

:func:`guesses`: "in" for the ``k_plus`` highest scores, "out" for the ``k_minus``
lowest, abstain on the rest (Steinke et al. 2023, Section 6); the counts chosen before
the scores are seen, so the bound's confidence holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SampleCanaries", "canary_direction", "client_inclusion", "correct_guesses",
           "direction_scores", "draw_inclusion", "draw_sample_canaries", "guesses"]

#: mixed into the scenario seed so that the draw is independent of every other draw
_SEED_TAG = 20_2023


@dataclass(frozen=True)
class SampleCanaries:
    """The drawn sample canaries (all arrays of length m, in draw order)."""

    ids: np.ndarray  # int64 global sample ids (from the holdout split)
    included: np.ndarray  # bool: trained on
    client: np.ndarray  # int64: the client that trains on it, -1 when excluded
    label: np.ndarray  # int64: the wrong label the canary carries

    @property
    def m(self) -> int:
        return int(len(self.ids))


def draw_inclusion(m: int, seed: int | list[int]) -> np.ndarray:
    """m independent fair coins (bool), reproducible by ``seed``."""
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    return np.random.default_rng(seed).random(m) < 0.5


def client_inclusion(m: int, seed: int) -> np.ndarray:
    """Which of the ``m`` canary clients take part (bool, fair coins from ``seed``)."""
    return draw_inclusion(m, [seed, _SEED_TAG, 2])


def canary_direction(seed: int, j: int, dim: int) -> np.ndarray:
    """Canary client j's unit direction (float64, length ``dim``): a standard normal
    vector from its own seed, normalised."""
    v = np.random.default_rng([seed, _SEED_TAG, 3, j]).standard_normal(dim)
    return v / np.linalg.norm(v)


def direction_scores(change: np.ndarray, seed: int, m: int) -> np.ndarray:
    """Score of each of the ``m`` canary directions: the sum over rounds of
    <global_t - global_{t-1}, u_j>, i.e. <global_T - global_0, u_j> (the sum telescopes);
    ``change`` is that flat float64 difference over the floating-point entries."""
    change = np.asarray(change, dtype=np.float64)
    return np.array([float(change @ canary_direction(seed, j, len(change)))
                     for j in range(m)])


def draw_sample_canaries(pool: np.ndarray, y: np.ndarray, m: int, num_clients: int,
                         num_classes: int, seed: int) -> SampleCanaries:
    """``m`` canaries drawn without replacement from the ids ``pool`` (labels ``y`` indexed
    by global id): a wrong label each (original + uniform 1..C-1 mod C), included with
    probability 1/2, an included one assigned to a uniformly random client."""
    if not 0 < m <= len(pool):
        raise ValueError(f"m must be in 1..{len(pool)}, got {m}")
    if num_classes < 2:
        raise ValueError("a wrong label needs at least 2 classes")
    rng = np.random.default_rng([seed, _SEED_TAG])
    ids = np.sort(rng.choice(np.asarray(pool, dtype=np.int64), size=m, replace=False))
    label = (y[ids] + rng.integers(1, num_classes, size=m)) % num_classes
    included = draw_inclusion(m, [seed, _SEED_TAG, 1])
    client = np.where(included, rng.integers(0, num_clients, size=m), -1)
    return SampleCanaries(ids, included, client.astype(np.int64), label.astype(np.int64))


def guesses(scores: np.ndarray, k_plus: int, k_minus: int) -> np.ndarray:
    """int8 guess per canary: +1 ("included") for the ``k_plus`` highest scores, -1
    ("excluded") for the ``k_minus`` lowest, 0 (abstain) otherwise.  Ties are broken by
    position (a stable sort), so the guesses are deterministic."""
    scores = np.asarray(scores, dtype=np.float64)
    m = len(scores)
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > m:
        raise ValueError(f"need k_plus, k_minus >= 0 and k_plus + k_minus <= {m} canaries, "
                         f"got {k_plus} + {k_minus}")
    if not np.all(np.isfinite(scores)):
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise ValueError(f"score {bad} is not finite ({scores[bad]!r})")
    order = np.argsort(scores, kind="stable")
    out = np.zeros(m, dtype=np.int8)
    out[order[:k_minus]] = -1
    if k_plus:
        out[order[m - k_plus:]] = 1
    return out


def correct_guesses(guess: np.ndarray, included: np.ndarray) -> tuple[int, int]:
    """(number of guesses r, number of correct guesses v)."""
    guess, included = np.asarray(guess), np.asarray(included, dtype=bool)
    r = int(np.count_nonzero(guess))
    v = int(np.count_nonzero((guess == 1) & included) + np.count_nonzero((guess == -1)
                                                                          & ~included))
    return r, v
