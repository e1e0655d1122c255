"""Gaussian-DP lower bound of a one-run audit: the f-DP analysis of the same guesses.

S. Mahloujifar, L. Melis, K. Chaudhuri, "Auditing f-Differential Privacy in One Run",
ICML 2025 (arXiv:2410.22235).  The audit is Steinke et al.'s (:mod:`fedaudit.dp_audit.bound`):
m canaries, each included with probability 1/2; the auditor makes k = k_plus + k_minus
guesses and v of them are right.  Instead of the (eps, delta) hypothesis, the hypothesis is
a trade-off function f; for mu-Gaussian DP (Dong, Roth & Su 2022), f = G_mu with

    G_mu(a) = Phi(Phi^-1(1 - a) - mu),   blow-up  B(x) = 1 - G_mu(x) = Phi(Phi^-1(x) + mu),

the most an event of probability x on one neighbour can weigh on the other.  The paper's
recursion (its "audit_rh_with_cap", alphabet size 2 for membership) bounds the probability
of >= v correct guesses by tau when, starting from

    r_v = tau v / m,   h_v = tau (k - v) / m,

and going down i = v-1, ..., 0,

    h_i = max(h_{i+1}, B^-1(r_{i+1})),   r_i = min(1, r_{i+1} + i / (k - i) (h_i - h_{i+1})),

the end point satisfies r_0 + h_0 > k / m: then "mu-GDP" is rejected at level tau.  The
rejection gets harder as mu grows (B^-1 shrinks), so the set of rejected mu is an interval
[0, mu*): :func:`mu_lower_bound` is mu*, the largest mu the guesses refute at confidence
1 - beta.  Its epsilon at delta is the mu*-GDP curve's,

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)     (Dong et al., Cor. 2.13)

(:func:`gdp_epsilon`), compared with the accountant's epsilon through the mu whose curve
passes through the claimed (eps, delta) (:func:`gdp_mu`).  Reading: the bound says the run
is less private than the Gaussian mechanism with that mu; for DP-SGD, whose privacy curve
is close to Gaussian (Dong et al.'s central limit theorem), that is the claim to test.

The guess counts (:func:`search_guesses`): the bound is computed for every candidate
(k_plus, k_minus) of :func:`guess_candidates`, each at level beta / (number of
candidates), and the largest is kept.  By the union bound the probability that ANY of them
wrongly rejects a true hypothesis is <= beta, so the kept bound holds at confidence
1 - beta although the counts were chosen after seeing the scores (Bonferroni).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr, ndtri

from fedaudit.dp_audit.bound import check_counts, epsilon_lower_bound
from fedaudit.dp_audit.canaries import correct_guesses, guesses

__all__ = ["GuessSearch", "fdp_rejects", "gdp_delta", "gdp_epsilon", "gdp_mu",
           "guess_candidates", "mu_lower_bound", "search_guesses"]

#: the search's fractions of m: k = f m guesses two-sided (k, k) and one-sided (2k, 0)
_FRACTIONS = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4)


def _check(m: int, k: int, v: int, tau: float) -> None:
    check_counts(m, k, v, guesses="k")
    if not 0.0 < tau < 1.0:
        raise ValueError(f"beta must be in (0, 1), got {tau!r}")


def fdp_margin(m: int, k: int, v: int, mu: float, tau: float) -> float:
    """r_0 + h_0 - k/m of the recursion (module docstring) for mu-GDP at level ``tau``:
    positive exactly when ``v`` correct of ``k`` guesses on ``m`` canaries reject mu-GDP."""
    _check(m, k, v, tau)
    if not mu >= 0.0:
        raise ValueError(f"mu must be >= 0, got {mu!r}")
    r, h = tau * v / m, tau * (k - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, float(ndtr(ndtri(r) - mu)))  # B^-1(r); ndtri(1) = inf -> 1
        if h_new == h:  # h, hence r, can no longer change
            break
        r = min(1.0, r + i / (k - i) * (h_new - h))
        h = h_new
    return r + h - k / m


def fdp_rejects(m: int, k: int, v: int, mu: float, tau: float) -> bool:
    """Whether the guesses reject mu-GDP at level ``tau`` (P[>= v correct] <= tau)."""
    return fdp_margin(m, k, v, mu, tau) > 0.0


def mu_lower_bound(m: int, k: int, v: int, *, beta: float = 0.05) -> float:
    """The largest mu that ``v`` correct of ``k`` guesses on ``m`` canaries reject at
    confidence ``1 - beta`` (0.0 when they reject none, i.e. not even mu = 0)."""
    f = lambda mu: fdp_margin(m, k, v, mu, beta)  # noqa: E731 - non-increasing in mu
    if k == 0 or f(0.0) <= 0.0:
        return 0.0
    hi = 1.0
    while f(hi) > 0.0:  # B^-1 -> 0 as mu grows, so the margin -> (beta - 1) k / m < 0
        hi *= 2.0
    return float(brentq(f, hi / 2 if hi > 1.0 else 0.0, hi, xtol=1e-10, rtol=1e-12))


def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu <= 0.0:
        return 0.0
    a, b = -eps / mu + mu / 2, -eps / mu - mu / 2
    return float(ndtr(a) - math.exp(min(eps + float(log_ndtr(b)), 700.0)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta`` (0 <= delta < 1); inf for mu = inf."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if math.isinf(mu):
        return math.inf
    if mu <= 0.0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu * mu + 4.0 * mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-12,
                        rtol=1e-12))


def gdp_mu(eps: float, delta: float) -> float:
    """The mu whose GDP curve passes through (``eps``, ``delta``): gdp_epsilon(mu, delta)
    = eps (inf for eps = inf, 0 for eps = 0)."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if math.isinf(eps):
        return math.inf
    if eps <= 0.0:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, eps) < delta:  # delta(eps) grows with mu
        hi *= 2.0
    return float(brentq(lambda mu: gdp_delta(mu, eps) - delta, 0.0 if hi == 1.0 else hi / 2,
                        hi, xtol=1e-12, rtol=1e-12))


def guess_candidates(m: int) -> list[tuple[int, int]]:
    """The (k_plus, k_minus) the search tries on ``m`` canaries, in a fixed order: for k =
    max(1, round(f m)), f in 1/64 .. 1/4, the two-sided (k, k) and the one-sided (2k, 0)."""
    out: list[tuple[int, int]] = []
    for f in _FRACTIONS:
        k = max(1, int(round(f * m)))
        for pair in ((k, k), (2 * k, 0)):
            if sum(pair) <= m and pair not in out:
                out.append(pair)
    return out


@dataclass(frozen=True)
class GuessSearch:
    """The search's kept guesses and their bounds (each at beta / candidates)."""

    k_plus: int
    k_minus: int
    guesses: int
    correct: int
    candidates: int
    beta_each: float
    mu_lower_bound: float
    epsilon_lower_bound_gdp: float  # of mu_lower_bound at the run's delta
    epsilon_lower_bound_steinke: float  # Steinke et al.'s bound of the same search


def search_guesses(scores: np.ndarray, included: np.ndarray, *, delta: float,
                   beta: float) -> GuessSearch:
    """The largest mu lower bound over :func:`guess_candidates`, each at ``beta`` / their
    number (module docstring); Steinke's epsilon is searched the same way, for comparison."""
    included = np.asarray(included, dtype=bool)
    m = len(included)
    cands = guess_candidates(m)
    each = beta / len(cands)
    best: tuple[float, int, int, int, int] | None = None
    eps_steinke = 0.0
    for kp, km in cands:
        r, v = correct_guesses(guesses(scores, kp, km), included)
        mu = mu_lower_bound(m, r, v, beta=each)
        eps_steinke = max(eps_steinke, epsilon_lower_bound(m, r, v, delta=delta, beta=each))
        if best is None or mu > best[0]:
            best = (mu, kp, km, r, v)
    assert best is not None
    mu, kp, km, r, v = best
    return GuessSearch(kp, km, r, v, len(cands), each, mu, gdp_epsilon(mu, delta),
                       eps_steinke)
