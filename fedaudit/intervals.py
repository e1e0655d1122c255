"""Uncertainty of the membership metrics: a 95 % interval on every AUC and TPR at a fixed
FPR, and a verdict against what chance gives (docs/algorithms.md section 5).  The AUC's
interval is computed in :mod:`fedaudit.metrics` (:func:`~fedaudit.metrics.auc_interval`,
from the scores); this module holds what needs only counts and numbers.

* AUC: DeLong, DeLong & Clarke-Pearson 1988, "Comparing the areas under two or more
  correlated receiver operating characteristic curves: a nonparametric approach",
  Biometrics 44(3).  With m members X and n non-members Y and psi(x, y) = 1 if x > y, 1/2
  if x = y, 0 otherwise, the placements

      V10_i = (1/n) sum_j psi(X_i, Y_j),     V01_j = (1/m) sum_i psi(X_i, Y_j)

  average to the AUC, and Var(AUC) = S10 / m + S01 / n with S10, S01 their sample
  variances (ddof 1).  Computed from midranks in O((m + n) log(m + n)) (Sun & Xu 2014,
  "Fast implementation of DeLong's algorithm", IEEE SPL 21(11)): V10_i = (R_i - Rx_i) / n,
  V01_j = 1 - (R_{m+j} - Ry_j) / m, R the midranks in the pooled sample, Rx, Ry within
  each class.  The interval is AUC +- z sqrt(Var), z = Phi^-1(0.975), cut to [0, 1]; with
  fewer than two samples of a class the variance is undefined and the interval is [0, 1].
  A perfect or a perfectly wrong attack has zero variance: its interval is the point.
* TPR at FPR <= b: the TPR is k / m for k members above the threshold; Clopper & Pearson
  1934's exact binomial interval on k of m, [B(a/2; k, m - k + 1), B(1 - a/2; k + 1, m -
  k)] with B the beta quantile (0 when k = 0, 1 when k = m), a = 0.05.  It holds the members'
  sampling only: the threshold is chosen on the same non-members, whose resolution
  ``1 / n_nonmembers`` is reported beside it.
* A TPR at FPR <= b against chance: an exact test (:func:`threshold_verdict`: members
  and non-members exchangeable; "above chance", "below chance" or "not distinguishable
  from chance"), not its interval: the threshold is chosen on the same non-members, which
  the interval on the members does not hold.  The verdicts a user reads (leaks, no leak
  beyond delta, inconclusive) are :mod:`fedaudit.verdicts`'; the AUC's test, at its unit of
  independence and exact for small samples, is :func:`fedaudit.verdicts.auc_estimate`.

Pure functions over arrays and counts, validated like :mod:`fedaudit.metrics`; scipy's
``special`` module is imported on first use (the simulated clients import this module's
callers and never compute an interval).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["ABOVE", "BELOW", "LEVEL", "UNDISTINGUISHED", "check_level", "clopper_pearson",
           "normal_interval", "threshold_verdict"]

#: the confidence level of every interval fedaudit reports
LEVEL = 0.95
ABOVE, BELOW, UNDISTINGUISHED = ("above chance", "below chance",
                                 "not distinguishable from chance")


def check_level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level!r}: must be > 0 and < 1")
    return float(level)


def normal_interval(centre: float, variance: float, level: float = LEVEL,
                    bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """``centre +- z sqrt(variance)``, z = Phi^-1((1 + level) / 2), cut to ``bounds``."""
    level = check_level(level)
    if not variance >= 0:
        raise ValueError(f"variance = {variance!r}: must be >= 0")
    half = NormalDist().inv_cdf(0.5 + level / 2) * float(np.sqrt(variance))
    return max(bounds[0], centre - half), min(bounds[1], centre + half)


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Clopper-Pearson's exact ``level`` interval of a binomial proportion, ``k`` successes
    in ``n`` trials (module docstring)."""
    from scipy.special import betaincinv

    level = check_level(level)
    for name, v in (("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{name} = {v!r}: must be an integer")
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"k = {k}, n = {n}: need n >= 1 and 0 <= k <= n")
    a = 1.0 - level
    lo = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, a / 2))
    hi = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - a / 2))
    return lo, hi


def threshold_verdict(k: int, j: int, m: int, n: int, level: float = LEVEL) -> str:
    """Whether k of ``m`` members above a threshold that j of ``n`` non-members pass is
    more (or fewer) than chance would give when the threshold is picked on these very
    non-members, as a TPR at FPR <= b is (j = the largest count <= b n).  Under chance the
    scores of members and non-members are exchangeable, and K, the number of members ranked
    above the (j + 1)-th non-member, has K >= k exactly when the top k + j ranks hold at
    least k members:

        P(K >= k) = P(H(k + j) >= k),   P(K <= k) = P(H(k + j + 1) <= k),

    H(d) the members among d draws without replacement from m + n (hypergeometric).
    :data:`ABOVE` when P(K >= k) < (1 - level) / 2, :data:`BELOW` when P(K <= k) is, else
    :data:`UNDISTINGUISHED`.  (Clopper-Pearson's interval on the members alone ignores the
    threshold's choice: with few non-members a random score passes its lower bound over
    b far more often than 2.5 % of the time -- docs/algorithms.md section 5.)"""
    from scipy.stats import hypergeom

    level = check_level(level)
    if not (0 <= k <= m and 0 <= j <= n and m >= 1 and n >= 1):
        raise ValueError(f"k = {k}, j = {j}, m = {m}, n = {n}: need 0 <= k <= m, 0 <= j <= n")
    a = (1.0 - level) / 2
    if k > 0 and hypergeom.sf(k - 1, m + n, m, k + j) < a:
        return ABOVE
    if k + j + 1 <= m + n and hypergeom.cdf(k, m + n, m, k + j + 1) < a:
        return BELOW
    return UNDISTINGUISHED
