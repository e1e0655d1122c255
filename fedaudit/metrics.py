"""Membership-inference metrics (docs/algorithms.md section 5).

Pure functions in the style of ``sklearn.metrics``: they validate their input and return
plain Python numbers, so the results go straight into ``results.json``.

Conventions
-----------
* ``members`` holds the ground truth: 1 (or ``True``) for a member (a training sample),
  0 for a non-member. Members are the positive class.
* ``scores`` are oriented so that a higher score means "more likely a member".
* The ROC curve is scikit-learn's ``roc_curve(members, scores, drop_intermediate=False)``:
  one point per distinct score threshold, starting at the origin (0, 0). Tied scores move
  together, so only those points are achievable by thresholding; we never interpolate
  between them (an interpolated point would need a randomised classifier).
* ``TPR at FPR <= b`` is the largest TPR over ROC points whose FPR does not exceed ``b``
  (0.0 if only the origin qualifies). ``FPR at TPR >= t`` is the smallest FPR over ROC
  points whose TPR reaches ``t`` (always defined: the curve ends at (1, 1)).
* With ``n`` non-members the smallest non-zero FPR is ``1/n``
  (``min_fpr_resolution``). When a bound is below it, the "TPR at FPR <= bound" is the
  TPR at FPR = 0; report the resolution next to it instead of pretending more precision.

The comparisons are exact: scikit-learn forms ``fpr = fp / n_neg`` and ``tpr = tp / n_pos``
by correctly rounded division, so a ratio that equals a decimal bound exactly (1/100 vs
0.01, 4/5 vs 0.8) compares equal, and rounding is monotone, so no tolerance is needed.

scikit-learn is imported inside the functions: every simulated client imports this module
(through the attack registry, to validate the scenario's attack names) and never computes
a metric, and ``sklearn.metrics`` took 1 s of each client actor's start-up.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "membership_metrics",
    "roc_points",
    "tpr_at_fpr",
    "fpr_at_tpr",
]

#: Keys of :func:`membership_metrics` that are copied into ``results.json``.
METRIC_KEYS: tuple[str, ...] = (
    "auc",
    "tpr_at_1pct_fpr",
    "tpr_at_0p1pct_fpr",
    "fpr_at_80pct_tpr",
)


def _validate(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Check and convert ``(scores, members)``; return float64 scores and int8 labels."""
    s = np.asarray(scores)
    m = np.asarray(members)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-D, got an array of shape {s.shape}")
    if m.ndim != 1:
        raise ValueError(f"members must be 1-D, got an array of shape {m.shape}")
    if s.shape[0] != m.shape[0]:
        raise ValueError(
            f"scores and members must have the same length, got {s.shape[0]} and {m.shape[0]}"
        )
    if s.dtype.kind not in "biuf":
        raise ValueError(f"scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    if not np.all(np.isfinite(s)):
        bad = np.flatnonzero(~np.isfinite(s))
        raise ValueError(
            f"scores must be finite; {bad.size} value(s) are NaN or infinite "
            f"(first at index {int(bad[0])}: {s[bad[0]]})"
        )
    if m.dtype.kind not in "biuf":
        raise ValueError(f"members must hold 0/1 (or booleans), got dtype {m.dtype}")
    if m.dtype.kind == "f" and not np.all(np.isfinite(m)):
        raise ValueError("members must hold only 0 and 1, found NaN or infinite values")
    values = np.unique(m)
    if not np.all(np.isin(values, (0, 1))):
        others = values[~np.isin(values, (0, 1))]
        raise ValueError(
            f"members must hold only 0 and 1 (or booleans), found {others[:5].tolist()}"
        )
    m = m.astype(np.int8)
    n_members = int(m.sum())
    if n_members == 0 or n_members == m.shape[0]:
        present = "members (1)" if n_members else "non-members (0)"
        raise ValueError(
            f"members must contain both classes (1 = member, 0 = non-member); "
            f"got only {present}, {m.shape[0]} sample(s)"
        )
    return s, m


def _check_rate(value: float, name: str) -> float:
    v = float(value)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return v


def roc_points(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """ROC curve ``(fpr, tpr)`` for plots; one point per distinct threshold.

    ``roc_curve(members, scores, drop_intermediate=False)``: both arrays start at 0 and end
    at 1, FPR and TPR are non-decreasing.
    """
    from sklearn.metrics import roc_curve  # here: see the module docstring

    s, m = _validate(scores, members)
    fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
    return fpr, tpr


def _tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, max_fpr: float) -> float:
    return float(tpr[fpr <= max_fpr].max())  # the origin (0, 0) always qualifies


def _fpr_at_tpr(fpr: np.ndarray, tpr: np.ndarray, min_tpr: float) -> float:
    return float(fpr[tpr >= min_tpr].min())  # the end point (1, 1) always qualifies


def tpr_at_fpr(scores: ArrayLike, members: ArrayLike, max_fpr: float) -> float:
    """Largest TPR over ROC points with ``FPR <= max_fpr`` (0.0 if only the origin)."""
    b = _check_rate(max_fpr, "max_fpr")
    fpr, tpr = roc_points(scores, members)
    return _tpr_at_fpr(fpr, tpr, b)


def fpr_at_tpr(scores: ArrayLike, members: ArrayLike, min_tpr: float) -> float:
    """Smallest FPR over ROC points with ``TPR >= min_tpr``."""
    t = _check_rate(min_tpr, "min_tpr")
    fpr, tpr = roc_points(scores, members)
    return _fpr_at_tpr(fpr, tpr, t)


def membership_metrics(scores: ArrayLike, members: ArrayLike) -> dict[str, Any]:
    """Summary metrics of a membership-inference attack.

    Parameters
    ----------
    scores : array of shape (n,)
        Attack scores, higher = more likely member; finite.
    members : array of shape (n,)
        Ground truth, 1/True = member, 0/False = non-member; both classes present.

    Returns
    -------
    dict with
        ``auc``                 area under the ROC curve (``roc_auc_score``; ties count 1/2),
        ``tpr_at_1pct_fpr``     largest TPR with FPR <= 0.01,
        ``tpr_at_0p1pct_fpr``   largest TPR with FPR <= 0.001,
        ``fpr_at_80pct_tpr``    smallest FPR with TPR >= 0.8,
        ``n_members``, ``n_nonmembers``,
        ``min_fpr_resolution``  ``1 / n_nonmembers``: the smallest non-zero FPR measurable.
        When it exceeds 0.01 (or 0.001), the matching TPR is the TPR at FPR = 0.
    """
    from sklearn.metrics import roc_auc_score, roc_curve  # here: see the module docstring

    s, m = _validate(scores, members)
    fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
    n_members = int(m.sum())
    n_nonmembers = int(m.shape[0] - n_members)
    return {
        "auc": float(roc_auc_score(m, s)),
        "tpr_at_1pct_fpr": _tpr_at_fpr(fpr, tpr, 0.01),
        "tpr_at_0p1pct_fpr": _tpr_at_fpr(fpr, tpr, 0.001),
        "fpr_at_80pct_tpr": _fpr_at_tpr(fpr, tpr, 0.8),
        "n_members": n_members,
        "n_nonmembers": n_nonmembers,
        "min_fpr_resolution": 1.0 / n_nonmembers,
    }
