"""Ranks of membership scores: the input checks every metric shares (scores against 0/1
members), midranks, and DeLong's placements (:mod:`fedaudit.intervals` gives the formula),
from which :mod:`fedaudit.metrics` and :mod:`fedaudit.verdicts.auc` compute an AUC's
interval and tests.  Pure numpy."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["check_scores", "delong_placements", "midranks", "placements"]


def check_scores(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
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


def midranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``, ties given the mean of the ranks they span."""
    order = np.argsort(x, kind="mergesort")
    s = x[order]
    first = np.r_[True, s[1:] != s[:-1]]  # where each run of equal values starts
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(s)] - 1
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = ((starts + ends) / 2 + 1)[np.cumsum(first) - 1]
    return ranks


def delong_placements(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """DeLong's placements ``(V10 over the members, V01 over the non-members)``
    (:mod:`fedaudit.intervals` gives the formula); their means are the AUC."""
    return placements(*check_scores(scores, members))


def placements(s: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = s[m == 1], s[m == 0]
    pooled = midranks(np.concatenate([x, y]))
    v10 = (pooled[:len(x)] - midranks(x)) / len(y)
    v01 = 1.0 - (pooled[len(x):] - midranks(y)) / len(x)
    return v10, v01
