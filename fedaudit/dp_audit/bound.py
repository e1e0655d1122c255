"""The epsilon lower bound of a one-run privacy audit (Steinke, Nasr & Jagielski 2023).

T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
NeurIPS 2023 (arXiv:2305.08846).  The audit: m canaries, each included in the training
data independently with probability 1/2; after training the auditor guesses "in" or "out"
for r of them (abstaining on the other m - r) and v of the r guesses are correct.

If the training algorithm is (epsilon, delta)-DP, the number of correct guesses W is
stochastically dominated by randomised response with accuracy
q = e^eps / (1 + e^eps), up to a delta term:

    p(eps) = P[Binomial(r, q) >= v]  +  2 m delta * alpha,
    alpha  = max_{i = 1..v}  P[v - i <= Binomial(r, q) < v] / i

(the paper's main theorem for pure DP and its extension to approximate DP, evaluated as
the paper's published p-value function and its search for eps do; p is capped at 1).  p(eps) is the
p-value of observing >= v correct guesses under the hypothesis "(eps, delta)-DP"; it grows
with eps.  The lower bound at confidence 1 - beta is the eps where p(eps) = beta: every
smaller eps is rejected at level beta, so the algorithm is NOT (eps', delta)-DP for any
eps' below it, with probability >= 1 - beta over the canary draw.

How delta enters: only through the additive 2 m delta alpha term; a larger delta (or more
canaries m at the same delta) gives a smaller bound.  Pure numbers, no torch.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom

__all__ = ["audit_p_value", "epsilon_lower_bound"]


def check_counts(m: int, r: int, v: int, guesses: str = "r") -> None:
    """Canaries ``m``, guesses ``r`` and correct guesses ``v``: integers, 0 <= v <= r <= m."""
    for name, val in (("m", m), (guesses, r), ("v", v)):
        if int(val) != val or val < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {val!r}")
    if not v <= r <= m:
        raise ValueError(f"need 0 <= v <= {guesses} <= m (correct <= guesses <= canaries), "
                         f"got v={v}, {guesses}={r}, m={m}")


def _check(m: int, r: int, v: int, delta: float) -> None:
    check_counts(m, r, v)
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta must be in [0, 1], got {delta!r}")


def audit_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """p(eps): probability of >= ``v`` correct guesses out of ``r`` (``m`` canaries) under
    the hypothesis that the algorithm is (``eps``, ``delta``)-DP (module docstring)."""
    _check(m, r, v, delta)
    if not eps >= 0.0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    q = 1.0 / (1.0 + math.exp(-eps)) if eps < 700 else 1.0
    tail = float(binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    alpha = 0.0
    if delta > 0.0 and v > 0:
        # P[v - i <= B < v] for i = 1..v: cumulative sums of pmf(v-1), pmf(v-2), ...
        below = np.cumsum(binom.pmf(np.arange(v - 1, -1, -1), r, q))
        alpha = float(np.max(below / np.arange(1, v + 1)))
    return min(1.0, tail + 2.0 * m * delta * alpha)


def epsilon_lower_bound(m: int, r: int, v: int, *, delta: float = 0.0,
                        beta: float = 0.05) -> float:
    """The largest eps with ``audit_p_value(m, r, v, eps, delta) <= beta``: the empirical
    epsilon lower bound at confidence ``1 - beta`` (module docstring).

    0.0 when the guesses are no evidence at that confidence (no guesses, v = 0, or too few
    correct).  Raises ValueError for impossible counts (v > r, r > m, negative) or beta
    outside (0, 1)."""
    _check(m, r, v, delta)
    if not 0.0 < beta < 1.0:
        raise ValueError(f"beta must be in (0, 1), got {beta!r}")
    f = lambda eps: audit_p_value(m, r, v, eps, delta) - beta  # noqa: E731 - increasing in eps
    if r == 0 or f(0.0) >= 0.0:
        return 0.0
    hi = 1.0
    while f(hi) < 0.0:  # p -> 1 as eps -> inf (q -> 1), so this ends
        hi *= 2.0
    return float(brentq(f, 0.0, hi, xtol=1e-12, rtol=1e-12))
