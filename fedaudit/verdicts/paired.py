"""Two AUCs on the same targets: DeLong, DeLong and Clarke-Pearson 1988's paired test
(Biometrics 44(3), the covariance of two correlated AUCs).  With the placements of both
scores (:func:`fedaudit.verdicts.ranks.delong_placements`) over the same ``m`` members and ``n``
non-members, ``S10`` and ``S01`` their 2 x 2 sample covariance matrices (ddof 1),

    Var(AUC_a - AUC_b) = (S10_aa + S10_bb - 2 S10_ab) / m + (S01_aa + S01_bb - 2 S01_ab) / n,

the difference's normal interval and one-sided p-values: does attack ``a`` (the malicious
server's active attack) beat ``b`` (the honest server's passive one) on these targets?"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedaudit.intervals import LEVEL, normal_interval
from fedaudit.verdicts.outcome import Estimate
from fedaudit.verdicts.ranks import delong_placements

__all__ = ["paired_auc_difference"]


def paired_auc_difference(scores_a: ArrayLike, scores_b: ArrayLike, members: ArrayLike,
                          level: float = LEVEL) -> Estimate:
    """The :class:`~fedaudit.verdicts.Estimate` of ``AUC(a) - AUC(b)`` on the same
    ``members`` (module docstring), against 0."""
    from scipy.stats import norm

    a10, a01 = delong_placements(scores_a, members)
    b10, b01 = delong_placements(scores_b, members)
    m, n = len(a10), len(a01)
    if m < 2 or n < 2:
        raise ValueError(f"{m} members and {n} non-members: the paired test needs at least "
                         "two of each")
    s10 = np.cov(np.vstack([a10, b10]), ddof=1)
    s01 = np.cov(np.vstack([a01, b01]), ddof=1)
    var = max(float((s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m
                    + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n), 0.0)
    diff = float(a10.mean() - b10.mean())
    sd = math.sqrt(var)
    if sd == 0:
        up, down = (0.0 if diff > 0 else 1.0), (0.0 if diff < 0 else 1.0)
    else:
        up, down = float(norm.sf(diff / sd)), float(norm.cdf(diff / sd))
    return Estimate(diff, normal_interval(diff, var, level, bounds=(-1.0, 1.0)), 0.0, up,
                    down, "DeLong's paired test", "target", m + n)
