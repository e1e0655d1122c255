"""A mean (or a ratio of sums) against its chance level, clustered by its unit of
independence (docs/algorithms.md section 5): :func:`clustered_ratio`, :func:`clustered_mean`.

With values ``y_i`` and weights ``w_i`` grouped in ``K`` clusters (a client's images over
several rounds, a client's updates), the estimate is the ratio of sums

    theta = sum_i y_i / sum_i w_i        (a plain mean: w_i = 1)

and its cluster-robust (sandwich) variance, with ``Y_k``, ``W_k`` the sums of cluster k,

    Var(theta) = K / (K - 1) * sum_k (Y_k - theta W_k)^2 / (sum_i w_i)^2,

(Cameron and Miller 2015, "A practitioner's guide to cluster-robust inference", J. Human
Resources 50(2), with their small-sample factor ``K / (K - 1)``), referred to Student's t
on ``K - 1`` degrees of freedom: the interval ``theta +- t sqrt(Var)`` and the one-sided
p-values of ``(theta - chance) / sqrt(Var)``.  One cluster gives no interval and no test.
Values that are all equal (a zero variance) give the point as interval, and p = 0 on the
side the point lies (p = 1 at chance exactly).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedaudit.intervals import LEVEL, check_level
from fedaudit.verdicts.outcome import Estimate

__all__ = ["clustered_mean", "clustered_ratio"]


def clustered_ratio(values: ArrayLike, weights: ArrayLike, clusters: ArrayLike, *,
                    chance: float, unit: str, level: float = LEVEL,
                    bounds: tuple[float, float] = (-math.inf, math.inf),
                    figure: float | None = None) -> Estimate:
    """The :class:`~fedaudit.verdicts.Estimate` of ``sum(values) / sum(weights)`` against
    ``chance``, clustered by ``clusters`` (module docstring); the interval is cut to
    ``bounds``; ``figure``: the value to report (by default the ratio itself)."""
    from scipy.stats import t

    level = check_level(level)
    y = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    cl = np.asarray(clusters)
    if y.ndim != 1 or y.shape != w.shape or y.shape != cl.shape or not len(y):
        raise ValueError(f"values, weights and clusters must be 1-d of one non-zero length, "
                         f"got shapes {y.shape}, {w.shape}, {cl.shape}")
    if not np.isfinite(y).all():
        i = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValueError(f"values must be finite; index {i} is {y[i]}")
    if not (np.isfinite(w).all() and (w >= 0).all()) or w.sum() <= 0:
        raise ValueError("weights must be finite, >= 0 and not all 0")
    total = float(w.sum())
    theta = float(y.sum() / total)
    shown = theta if figure is None else float(figure)
    _, k = np.unique(cl, return_inverse=True)
    kk = int(k.max()) + 1
    if kk < 2:
        return Estimate(shown, None, chance, None, None,
                        f"one {unit}: no interval", unit, kk)
    yk = np.bincount(k, weights=y, minlength=kk)
    wk = np.bincount(k, weights=w, minlength=kk)
    var = kk / (kk - 1) * float(np.sum((yk - theta * wk) ** 2)) / total ** 2
    sd = math.sqrt(var)
    half = float(t.ppf(0.5 + level / 2, kk - 1)) * sd
    interval = (max(bounds[0], theta - half), min(bounds[1], theta + half))
    if sd == 0:
        up = 0.0 if theta > chance else 1.0
        down = 0.0 if theta < chance else 1.0
    else:
        stat = (theta - chance) / sd
        up, down = float(t.sf(stat, kk - 1)), float(t.cdf(stat, kk - 1))
    return Estimate(shown, interval, chance, up, down,
                    f"clustered by {unit} (t, {kk - 1} df)", unit, kk)


def clustered_mean(values: ArrayLike, clusters: ArrayLike, *, chance: float, unit: str,
                   level: float = LEVEL,
                   bounds: tuple[float, float] = (-math.inf, math.inf)) -> Estimate:
    """:func:`clustered_ratio` with unit weights: the mean of ``values``."""
    y = np.asarray(values, dtype=np.float64)
    return clustered_ratio(y, np.ones_like(y), clusters, chance=chance, unit=unit,
                           level=level, bounds=bounds)
