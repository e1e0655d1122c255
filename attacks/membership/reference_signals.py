"""What the reference models say about the audit samples: the input of the reference-model
attacks (LiRA, RMIA, FedMIA -- docs/algorithms.md section 8), and the statistic they share.

Reference models are trained like the target, by the auditor, on data it controls.  The
auditor's side (which data each reference trained on, training them, caching them) is
:mod:`fedaudit.audit.reference_models`; what reaches an attack is a :class:`ReferenceSignals`:
the references' probabilities on the audit samples (and, for RMIA, on population samples
that no model trained on), plus which references had each audit sample IN (online mode).

Sequences (text data): a sequence is one two-outcome sample [pbar, 1 - pbar], pbar its
geometric-mean target probability (:mod:`attacks.membership.sequences`); the target's
outputs are reduced in each attack, the references' when the auditor collects them
(:mod:`fedaudit.audit.reference_models`), so :class:`ReferenceSignals` hold (R, N, 2) on
text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["EPS", "MIN_STD", "ReferenceSignals", "TuningSignals", "logit_confidence",
           "true_label_probs"]

#: floor of probabilities and of sums of probabilities before a log (an output that
#: underflowed to 0 in float32); the same floor the baselines use
EPS = 1e-30
#: floor of a fitted standard deviation (all references gave the same statistic)
MIN_STD = 1e-12


@dataclass(frozen=True)
class ReferenceSignals:
    """What the reference models say, aligned with the audit samples ``x`` an attack gets.

    Attributes
    ----------
    probs : (R, N, C) float64 softmax outputs of the R references on the N audit samples.
    in_mask : (R, N) bool, True where reference r trained on audit sample n (online mode);
        None offline (no reference saw any audit sample).
    population_x, population_y : the population samples z (never trained on by the target
        nor by any reference) and their labels.
    population_probs : (R, Z, C) the references' outputs on them.
    views : (A, R, N, C) the references' outputs on the A augmented views of the audit
        samples (:func:`attacks.membership.augment.augmented_views`, the sample itself first) with
        the name of the augmentation in ``augment``; None without augmented queries.
    tuning : what RMIA's ``a = "auto"`` attacks (:class:`TuningSignals`); None online.
    """

    probs: np.ndarray
    in_mask: np.ndarray | None
    population_x: np.ndarray
    population_y: np.ndarray
    population_probs: np.ndarray
    views: np.ndarray | None = None
    augment: str = "none"
    tuning: "TuningSignals | None" = None

    @property
    def online(self) -> bool:
        return self.in_mask is not None

    @classmethod
    def out_only(cls, probs: ArrayLike, x: np.ndarray, y: np.ndarray) -> "ReferenceSignals":
        """Offline references without a population: ``probs`` (R, N, C) of R models that
        never trained on the N samples (FedMIA's other clients of a round, the DP audit's
        references on its canaries); ``x``, ``y`` give the population's dtypes."""
        p = np.asarray(probs, dtype=np.float64)
        return cls(p, None, x[:0], y[:0], np.zeros((p.shape[0], 0, p.shape[2])))


@dataclass(frozen=True)
class TuningSignals:
    """Samples whose membership in every reference is known (the references' own training
    data and data none trained on): ``probs`` (R, T, C) the references' outputs, ``y`` (T,)
    the labels, ``in_mask`` (R, T) True where reference r trained on sample t."""

    probs: np.ndarray
    y: np.ndarray
    in_mask: np.ndarray


def _proba(p: ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(a)) or a.min(initial=0.0) < 0.0:
        raise ValueError(f"{name} must hold finite probabilities >= 0")
    return a


def _labels(y: ArrayLike, n: int, classes: int, name: str) -> np.ndarray:
    a = np.asarray(y)
    if a.shape != (n,) or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be ({n},) integer labels, got shape {a.shape}, "
                         f"dtype {a.dtype}")
    if a.size and (a.min() < 0 or a.max() >= classes):
        raise ValueError(f"{name} must lie in 0..{classes - 1}")
    return a.astype(np.int64)


def logit_confidence(proba: ArrayLike, y: ArrayLike) -> np.ndarray:
    """LiRA's statistic ``phi = log p_y - log(sum_{y' != y} p_y')`` for each sample.

    ``proba`` is (..., N, C); ``y`` (N,).  The sum runs over the other classes' own
    probabilities (never ``1 - p_y``, which cancels to 0 when ``p_y`` rounds to 1), each
    term floored at :data:`EPS`, so confident members keep distinct, finite statistics.
    """
    p = _proba(proba, "proba")
    if p.ndim < 2:
        raise ValueError(f"proba must be (..., N, C), got shape {p.shape}")
    labels = _labels(y, p.shape[-2], p.shape[-1], "y")
    onehot = np.zeros(p.shape[-2:], dtype=bool)
    onehot[np.arange(len(labels)), labels] = True
    p_y = np.where(onehot, p, 0.0).sum(axis=-1)
    rest = np.where(onehot, 0.0, p).sum(axis=-1)
    return np.log(np.maximum(p_y, EPS)) - np.log(np.maximum(rest, EPS))


def true_label_probs(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each sample's probability of its label ``y`` (N,) in ``p`` (..., N, C)."""
    return np.take_along_axis(p, np.broadcast_to(y[..., None], p.shape[:-1] + (1,)),
                              axis=-1)[..., 0]
