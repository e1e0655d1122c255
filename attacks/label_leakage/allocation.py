"""From per-class scores to integer label counts: the greedy allocation of LLG's second
stage, and the rounding of fractional counts to the nearest multiset of n labels."""

from __future__ import annotations

import numpy as np

__all__ = ["allocate_greedily", "round_counts"]


def allocate_greedily(scores: np.ndarray, step: float, counts: np.ndarray,
                      total: int) -> np.ndarray:
    """Until ``counts`` sums to ``total``: add one label of the class with the lowest score
    (the lowest index among ties) and raise that score by ``step`` -- Wainakh et al.'s
    stage 2 (a class's next occurrence is expected to have lifted its gradient by the
    impact).  Returns new int64 counts; ``scores`` and ``counts`` are not modified."""
    s = np.array(scores, dtype=np.float64)
    c = np.array(counts, dtype=np.int64)
    for _ in range(total - int(c.sum())):
        j = int(np.argmin(s))
        c[j] += 1
        s[j] += step
    return c


def round_counts(raw: np.ndarray, total: int, at_least: np.ndarray | None = None
                 ) -> np.ndarray:
    """The integer counts ``c >= at_least`` (default 0) summing to ``total`` nearest to the
    fractional ``raw`` counts in squared distance, ``argmin_c sum_j (c_j - r_j)^2``.

    The objective is separable and convex, so starting from the lower bounds and adding
    units one at a time, each where it lowers the objective most, is optimal (marginal
    allocation): adding one to class j lowers it by ``2 (r_j - c_j) - 1``, so each unit
    goes to ``argmax_j (r_j - c_j)`` (:func:`allocate_greedily` on ``at_least - raw`` with
    step 1).
    Ties go to the lowest class index.  ``ValueError`` when the lower bounds already
    exceed ``total``."""
    r = np.asarray(raw, dtype=np.float64)
    if r.ndim != 1 or not np.all(np.isfinite(r)):
        raise ValueError(f"raw counts must be a finite 1-D array, got {r!r}")
    low = np.zeros(len(r), dtype=np.int64) if at_least is None else np.asarray(at_least)
    if low.shape != r.shape or np.any(low < 0):
        raise ValueError(f"at_least must be {len(r)} non-negative counts, got {low!r}")
    if total < int(low.sum()):
        raise ValueError(f"total = {total} is below the lower bounds' sum {int(low.sum())}")
    return allocate_greedily(low - r, 1.0, low.astype(np.int64), total)
