"""An AUC against chance (0.5), tested at its unit of independence (docs/algorithms.md
section 5): :func:`auc_estimate`.

With ``m`` members (the positive class) and ``n`` non-members:

* **Independent samples, both classes of at least** :data:`EXACT_BELOW`: DeLong's interval
  (:func:`fedaudit.metrics.auc_interval`, from :func:`fedaudit.verdicts.ranks.placements`)
  and the Mann-Whitney test's one-sided p-values in its normal approximation, with the
  exact null variance (tie-corrected) and a continuity correction (scipy's
  ``method="asymptotic"``): under chance members and non-members are exchangeable, and
  DeLong's estimated variance, used as a test, calls 5.5 % of null 50-vs-50 rankings
  significant at 5 % (docs/validation.md section 24).
* **Fewer samples in a class**: the normal approximation fails (at 3 vs 3 DeLong calls
  20 % of random rankings significant): the p-values are the exact Mann-Whitney test's
  (members and non-members exchangeable under chance; scipy's exact distribution without
  ties, an exact enumeration or :data:`PERMUTATIONS` seeded draws of the rank sum with
  ties), and the interval is Newcombe's score interval with a continuity correction
  (Newcombe 2006, "Confidence intervals for an effect size measure based on the
  Mann-Whitney statistic. Part 2", Statistics in Medicine 25, method 5): the ``theta`` with

      |AUC - theta| - 1 / (2 m n) <= z sqrt(V(theta)),
      V(theta) = theta (1 - theta) [1 + (N* - 1)(1 - theta) / (2 - theta)
                                      + (N* - 1) theta / (1 + theta)] / (m n),

  ``N* = (m + n) / 2`` (Hanley and McNeil's variance; ``V(1/2) = (m + n + 1) / (12 m n)``,
  the exact null variance).  It never collapses to a point: a perfect ranking of 3 vs 3
  gives [0.45, 1], exact p = 1/20 on one side.
* **Clustered units** (``clusters``: several updates or samples of one client): Obuchowski
  1997's clustered variance ("Nonparametric analysis of clustered ROC curve data",
  Biometrics 53(2)), with ``V10_k``, ``V01_k`` the sums of the placements of cluster k's
  members and non-members, ``m_k``, ``n_k`` their counts and ``K10``, ``K01``, ``K`` the
  clusters holding members, non-members and any,

      S10 = K10 / ((K10 - 1) m) sum_k (V10_k - m_k AUC)^2,   S01 likewise over non-members,
      S11 = K / (K - 1) sum_k (V10_k - m_k AUC)(V01_k - n_k AUC),
      Var(AUC) = S10 / m + S01 / n + 2 S11 / (m n),

  (DeLong's when every cluster holds one unit), with Student's t on ``K - 1`` degrees of
  freedom.  When every cluster holds one class (a client's property is the same in every
  round), the p-values are a cluster permutation test instead: the clusters' classes
  shuffled (:data:`PERMUTATIONS` seeded draws, or every arrangement when fewer), the
  pooled AUC recomputed -- exact under chance, where the clustered variance's t calls a
  leak too often with few clusters of one class each (docs/validation.md section 24).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fedaudit.intervals import LEVEL, normal_interval
from fedaudit.verdicts.outcome import Estimate
from fedaudit.verdicts.ranks import check_scores, placements

__all__ = ["EXACT_BELOW", "PERMUTATIONS", "auc_estimate", "newcombe_interval",
           "obuchowski_variance"]

#: the smallest class size at which DeLong's normal approximation is used
EXACT_BELOW = 50
#: seeded random arrangements of a permutation test (its smallest p is 1 / 20,000)
PERMUTATIONS = 19_999
#: the permutation tests' seed: the same scores give the same p-values on any machine
SEED = 57
#: float slack when a permuted statistic is compared with the observed one: both are sums
#: of the same halves and ones in another order (at most a few ulps apart when equal)
_SLACK = 1e-12


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def newcombe_interval(auc: float, m: int, n: int, level: float = LEVEL
                      ) -> tuple[float, float]:
    """Newcombe's continuity-corrected score interval of an AUC from ``m`` members and
    ``n`` non-members (module docstring)."""
    from scipy.optimize import brentq

    if m < 1 or n < 1:
        raise ValueError(f"m = {m}, n = {n}: need at least one sample of each class")
    if not 0.0 <= auc <= 1.0:
        raise ValueError(f"auc = {auc!r}: must lie in [0, 1]")
    z, c, star = _z(level), 1.0 / (2 * m * n), (m + n) / 2

    def sd(t: float) -> float:
        v = t * (1 - t) * (1 + (star - 1) * (1 - t) / (2 - t) + (star - 1) * t / (1 + t))
        return math.sqrt(max(v, 0.0) / (m * n))

    lo, hi = 0.0, 1.0
    if auc - c > 0:  # f(0) = auc - c > 0 and f(auc - c) = -z sd < 0
        lo = brentq(lambda t: (auc - c - t) - z * sd(t), 0.0, auc - c, xtol=1e-14)
    if auc + c < 1:
        hi = brentq(lambda t: (t - auc - c) - z * sd(t), auc + c, 1.0, xtol=1e-14)
    return float(lo), float(hi)


def _exact_rank_test(s: np.ndarray, member: np.ndarray) -> tuple[float, float, str]:
    """One-sided p-values ``(P(U >= u), P(U <= u))`` of the members' Mann-Whitney U under
    exchangeability: scipy's exact distribution without ties, else the rank sum over
    every arrangement (when at most :data:`PERMUTATIONS`) or over seeded draws."""
    from scipy.stats import mannwhitneyu, rankdata

    x, y = s[member], s[~member]
    if len(np.unique(s)) == len(s):
        up = mannwhitneyu(x, y, alternative="greater", method="exact").pvalue
        down = mannwhitneyu(x, y, alternative="less", method="exact").pvalue
        return float(up), float(down), "exact Mann-Whitney"
    twice = np.rint(2 * rankdata(s)).astype(np.int64)  # midranks are halves: exact sums
    m, total = int(member.sum()), len(s)
    observed = int(twice[member].sum())
    if math.comb(total, m) <= PERMUTATIONS:
        sums = np.array([twice[list(c)].sum() for c in itertools.combinations(range(total), m)])
        return (float((sums >= observed).mean()), float((sums <= observed).mean()),
                "exact Mann-Whitney (ties: every arrangement)")
    rng = np.random.default_rng(SEED)
    keys = rng.random((PERMUTATIONS, total))
    picked = np.argpartition(keys, m - 1, axis=1)[:, :m]
    sums = twice[picked].sum(axis=1)
    b = PERMUTATIONS + 1
    return (float((1 + (sums >= observed).sum()) / b), float((1 + (sums <= observed).sum()) / b),
            f"Mann-Whitney permutation test ({PERMUTATIONS:,} draws; ties)")


def _asymptotic_rank_test(s: np.ndarray, member: np.ndarray) -> tuple[float, float]:
    """One-sided p-values of the members' Mann-Whitney U in its normal approximation (exact
    null variance with the tie correction, continuity-corrected)."""
    from scipy.stats import mannwhitneyu

    x, y = s[member], s[~member]
    if np.all(s == s[0]):  # every score tied: U is its mean whatever the labels
        return 1.0, 1.0
    return (float(mannwhitneyu(x, y, alternative="greater", method="asymptotic").pvalue),
            float(mannwhitneyu(x, y, alternative="less", method="asymptotic").pvalue))


def _placements(s: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return placements(s, member.astype(np.int8))


def obuchowski_variance(scores: ArrayLike, members: ArrayLike, clusters: ArrayLike
                        ) -> tuple[float, float, int]:
    """``(AUC, Var(AUC), K)``: Obuchowski's clustered variance (module docstring); the
    variance is NaN when fewer than two clusters hold members or non-members."""
    s, member, cl = _inputs(scores, members, clusters)
    v10, v01 = _placements(s, member)
    auc = float(v10.mean())
    _, k = np.unique(cl, return_inverse=True)
    kk = int(k.max()) + 1
    m, n = int(member.sum()), int((~member).sum())
    V10 = np.bincount(k[member], weights=v10, minlength=kk)
    V01 = np.bincount(k[~member], weights=v01, minlength=kk)
    mk = np.bincount(k[member], minlength=kk)
    nk = np.bincount(k[~member], minlength=kk)
    k10, k01 = int((mk > 0).sum()), int((nk > 0).sum())
    if k10 < 2 or k01 < 2:
        return auc, math.nan, kk
    d10, d01 = V10 - mk * auc, V01 - nk * auc
    s10 = k10 / ((k10 - 1) * m) * float(np.sum(d10 ** 2))
    s01 = k01 / ((k01 - 1) * n) * float(np.sum(d01 ** 2))
    s11 = kk / (kk - 1) * float(np.sum(d10 * d01))
    return auc, max(s10 / m + s01 / n + 2 * s11 / (m * n), 0.0), kk


def _inputs(scores: ArrayLike, members: ArrayLike, clusters: ArrayLike | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    s, m = check_scores(scores, members)
    if clusters is None:
        return s, m.astype(bool), None
    cl = np.asarray(clusters)
    if cl.shape != s.shape:
        raise ValueError(f"clusters must have the scores' shape {s.shape}, got {cl.shape}")
    return s, m.astype(bool), cl


def _cluster_permutation(s: np.ndarray, member: np.ndarray, k: np.ndarray
                         ) -> tuple[float, float, str]:
    """One-sided p-values of the pooled AUC when every cluster holds one class: the
    clusters' classes shuffled (module docstring)."""
    kk = int(k.max()) + 1
    size = np.bincount(k, minlength=kk).astype(np.float64)
    psi = ((s[:, None] > s[None, :]) + 0.5 * (s[:, None] == s[None, :])).astype(np.float64)
    # pair[k, l]: the sum of psi over the units of cluster k against those of cluster l
    onehot = np.zeros((len(s), kk))
    onehot[np.arange(len(s)), k] = 1.0
    pair = onehot.T @ psi @ onehot
    positive = np.zeros(kk)
    positive[np.unique(k[member])] = 1.0
    k1 = int(positive.sum())

    def aucs(z: np.ndarray) -> np.ndarray:
        num = np.einsum("bk,kl,bl->b", z, pair, 1.0 - z)
        return num / ((z @ size) * ((1.0 - z) @ size))

    observed = float(aucs(positive[None, :])[0])
    if math.comb(kk, k1) <= PERMUTATIONS:
        z = np.zeros((math.comb(kk, k1), kk))
        for row, c in enumerate(itertools.combinations(range(kk), k1)):
            z[row, list(c)] = 1.0
        a = aucs(z)
        return (float((a >= observed - _SLACK).mean()), float((a <= observed + _SLACK).mean()),
                f"cluster permutation test (every arrangement of {kk} clients)")
    rng = np.random.default_rng(SEED)
    z = np.zeros((PERMUTATIONS, kk))
    picked = np.argpartition(rng.random((PERMUTATIONS, kk)), k1 - 1, axis=1)[:, :k1]
    np.put_along_axis(z, picked, 1.0, axis=1)
    a = aucs(z)
    b = PERMUTATIONS + 1
    return (float((1 + (a >= observed - _SLACK).sum()) / b),
            float((1 + (a <= observed + _SLACK).sum()) / b),
            f"cluster permutation test ({PERMUTATIONS:,} draws over {kk} clients)")


@dataclass(frozen=True)
class _T:
    df: int

    def interval(self, centre: float, sd: float, level: float) -> tuple[float, float]:
        from scipy.stats import t

        half = float(t.ppf(0.5 + level / 2, self.df)) * sd
        return max(0.0, centre - half), min(1.0, centre + half)

    def p(self, stat: float) -> tuple[float, float]:
        from scipy.stats import t

        return float(t.sf(stat, self.df)), float(t.cdf(stat, self.df))


def _normal_p(auc: float, sd: float) -> tuple[float, float]:
    from scipy.stats import norm

    if sd == 0:
        return (0.0 if auc > 0.5 else 1.0), (0.0 if auc < 0.5 else 1.0)
    z = (auc - 0.5) / sd
    return float(norm.sf(z)), float(norm.cdf(z))


def auc_estimate(scores: ArrayLike, members: ArrayLike, clusters: ArrayLike | None = None,
                 *, auc: float | None = None, unit: str = "client",
                 level: float = LEVEL) -> Estimate:
    """The :class:`~fedaudit.verdicts.Estimate` of the AUC of ``scores`` (higher = member)
    against ``members`` (1 = member), at chance 0.5 (module docstring); ``clusters``: each
    score's unit of independence (its client, named ``unit``), or None when the scores are
    independent samples.  ``auc``: the AUC to centre the interval on (the bit-exact one of
    :func:`fedaudit.metrics.membership_metrics`; by default the placements' mean)."""
    s, member, cl = _inputs(scores, members, clusters)
    m, n = int(member.sum()), int((~member).sum())
    if cl is None:
        v10, v01 = _placements(s, member)
        a = float(v10.mean()) if auc is None else float(auc)
        if min(m, n) < EXACT_BELOW:
            up, down, method = _exact_rank_test(s, member)
            return Estimate(a, newcombe_interval(a, m, n, level), 0.5, up, down,
                            f"{method}; Newcombe's score interval", "sample", m + n)
        var = float(v10.var(ddof=1) / m + v01.var(ddof=1) / n)
        up, down = _asymptotic_rank_test(s, member)
        return Estimate(a, normal_interval(a, var, level), 0.5, up, down,
                        "Mann-Whitney (normal approximation); DeLong's interval", "sample",
                        m + n)
    a0, var, kk = obuchowski_variance(s, member, cl)
    a = a0 if auc is None else float(auc)
    _, k = np.unique(cl, return_inverse=True)
    pure = np.all(np.bincount(k, weights=member, minlength=kk)
                  * np.bincount(k, weights=~member, minlength=kk) == 0)
    if math.isnan(var):
        return Estimate(a, None, 0.5, None, None,
                        f"clustered by {unit}: fewer than 2 {unit}s of a class", unit, kk)
    sd, t = math.sqrt(var), _T(kk - 1)
    interval = t.interval(a, sd, level)
    if pure:
        up, down, method = _cluster_permutation(s, member, k)
        return Estimate(a, interval, 0.5, up, down,
                        f"{method}; Obuchowski's clustered interval (t, {kk - 1} df)", unit, kk)
    if sd == 0:
        up, down = _normal_p(a, 0.0)
    else:
        up, down = t.p((a - 0.5) / sd)
    return Estimate(a, interval, 0.5, up, down,
                    f"Obuchowski, clustered by {unit} (t, {kk - 1} df)", unit, kk)
