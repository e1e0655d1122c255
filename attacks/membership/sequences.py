"""A sequence as one outcome, for the attacks whose statistic is the confidence of a class
(LiRA, RMIA, FedMIA: :mod:`attacks.membership.lira`, :mod:`~attacks.membership.rmia`, :mod:`~attacks.membership.fedmia`).

For a sequence with next-token distributions p_t (t = 1..L) and targets y_t the
per-sequence likelihood is summarised by its geometric-mean target probability

    pbar = exp( (1/L) sum_t log max(p_t[y_t], EPS) )        (= exp(-mean token NLL))

and the sequence is treated as a two-outcome sample [pbar, 1 - pbar] whose "true class"
is 0.  Then LiRA's statistic log p_y - log sum_{y' != y} p_y' is logit(pbar), a monotone
function of the mean token log-likelihood, which, as a mean over L tokens, is close to
Gaussian across reference models (Carlini et al. 2022 fit Gaussians to the logit of an
image's confidence; for sequences the mean token log-likelihood plays that role); RMIA's
p(x | theta) is pbar, a per-token likelihood, so ratios between models stay in a
floating-point range at any L.  1 - pbar is computed as -expm1(log pbar), exact near
pbar = 1 (a memorised sequence).  Class probabilities (N, C) with labels (N,) pass
through unchanged, so image numbers do not move.
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_outcomes", "outcome_labels"]

#: the floor of a token probability before its log (the baselines' and reference's EPS)
EPS = 1e-30


def as_outcomes(proba: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(..., N, L, V)`` next-token probabilities with ``(N, L)`` targets -> ``(..., N, 2)``
    outcome probabilities [pbar, 1 - pbar] and labels zeros (N,); ``(..., N, C)`` with
    ``(N,)`` labels are returned as they are."""
    t = np.asarray(y)
    if t.ndim != 2:
        return proba, y
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim < 3 or p.shape[-3:-1] != t.shape:
        raise ValueError(f"next-token probabilities (..., N, L, V) for targets {t.shape} "
                         f"expected, got shape {p.shape}")
    picked = np.take_along_axis(p, np.broadcast_to(t[..., None], p.shape[:-1] + (1,)),
                                axis=-1)[..., 0]
    log_pbar = np.log(np.maximum(picked, EPS)).mean(axis=-1)
    return np.stack([np.exp(log_pbar), -np.expm1(log_pbar)], axis=-1), outcome_labels(t)


def outcome_labels(y: np.ndarray) -> np.ndarray:
    """The labels that go with :func:`as_outcomes`' probabilities: zeros (N,) for (N, L)
    targets, the labels themselves otherwise."""
    t = np.asarray(y)
    return np.zeros(len(t), dtype=np.int64) if t.ndim == 2 else t
