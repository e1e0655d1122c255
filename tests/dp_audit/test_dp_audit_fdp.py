"""The Gaussian-DP analysis of a one-run audit (fedaudit.dp_audit.fdp) against hand-computed
cases, an independent high-precision implementation of Mahloujifar et al.'s recursion and of
the GDP -> (eps, delta) conversion, and a simulated mu-GDP mechanism.

(``opake-auditing`` was not used as the reference: it requires torch and a compiled
accounting wheel, not a small pure-Python test dependency.)"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy.stats import norm

from fedaudit.dp_audit.canaries import correct_guesses, guesses
from fedaudit.dp_audit.fdp import (fdp_margin, fdp_rejects, gdp_delta, gdp_epsilon, gdp_mu,
                                   guess_candidates, mu_lower_bound, search_guesses)
from fedaudit.dp_audit.summary import audit_summary, warning_message

mpmath.mp.dps = 50


def _margin_reference(m, k, v, mu, tau):
    """Mahloujifar et al.'s recursion as the paper writes it -- full arrays h[0..v],
    r[0..v], no early exit -- in 50-digit arithmetic (mpmath's erfc, not scipy)."""
    mu, tau = mpmath.mpf(mu), mpmath.mpf(tau)
    Phi = lambda x: mpmath.ncdf(x)  # noqa: E731
    Phi_inv = lambda p: -mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * p) if p < 1 else mpmath.inf  # noqa: E731

    def blow_up_inverse(x):
        return mpmath.mpf(1) if x >= 1 else Phi(Phi_inv(x) - mu)

    h = [mpmath.mpf(0)] * (v + 1)
    r = [mpmath.mpf(0)] * (v + 1)
    r[v], h[v] = tau * v / m, tau * (k - v) / m
    for i in range(v - 1, -1, -1):
        h[i] = max(h[i + 1], blow_up_inverse(r[i + 1]))
        r[i] = min(mpmath.mpf(1), r[i + 1] + mpmath.mpf(i) / (k - i) * (h[i] - h[i + 1]))
    return float(r[0] + h[0] - mpmath.mpf(k) / m)


@pytest.mark.parametrize("m, k, v, mu", [
    (1000, 100, 100, 1.0), (1000, 100, 90, 0.5), (1000, 500, 400, 0.4), (200, 100, 93, 0.9),
    (200, 100, 60, 0.02), (100, 50, 50, 1.3), (1000, 62, 62, 0.0), (50, 50, 30, 2.0),
])
def test_margin_matches_the_high_precision_reference(m, k, v, mu):
    # the margin is a sum of O(v) terms of size <= 1 in float64: 1e-12 is ~1e4 ulp of 1
    assert fdp_margin(m, k, v, mu, 0.05) == pytest.approx(
        _margin_reference(m, k, v, mu, 0.05), rel=1e-9, abs=1e-12)


def test_margin_hand_computed_one_and_two_correct():
    """v = 1: r_0 = r_1 = tau/m, h_0 = max(tau (k-1)/m, Phi(Phi^-1(tau/m) - mu));
    v = 2: one more step with weight 1/(k-1)."""
    m, k, tau, mu = 10, 4, 0.05, 0.7
    b_inv = lambda x: norm.cdf(norm.ppf(x) - mu)  # noqa: E731
    want1 = tau / m + max(tau * (k - 1) / m, b_inv(tau / m)) - k / m
    assert fdp_margin(m, k, 1, mu, tau) == pytest.approx(want1, rel=1e-12)
    r2, h2 = 2 * tau / m, tau * (k - 2) / m
    h1 = max(h2, b_inv(r2))
    r1 = r2 + (1 / (k - 1)) * (h1 - h2)
    h0 = max(h1, b_inv(r1))
    assert fdp_margin(m, k, 2, mu, tau) == pytest.approx(r1 + h0 - k / m, rel=1e-12)


def test_mu_bound_is_where_the_margin_crosses_zero():
    m, k, v = 1000, 250, 230
    mu = mu_lower_bound(m, k, v, beta=0.05)
    assert 0.5 < mu < 2.0
    assert _margin_reference(m, k, v, mu * (1 - 1e-6), 0.05) > 0  # rejected just below
    assert _margin_reference(m, k, v, mu * (1 + 1e-6), 0.05) <= 0  # not just above
    assert fdp_rejects(m, k, v, 0.9 * mu, 0.05) and not fdp_rejects(m, k, v, 1.1 * mu, 0.05)


def test_mu_bound_edge_cases_and_monotonicity():
    assert mu_lower_bound(100, 0, 0) == 0.0
    assert mu_lower_bound(100, 50, 25) == 0.0  # chance-level guesses reject nothing
    assert mu_lower_bound(100, 1, 1) == 0.0  # one right guess proves nothing at 95%
    more = [mu_lower_bound(1000, 200, v) for v in (120, 150, 180, 200)]
    assert more == sorted(more) and more[0] > 0
    assert mu_lower_bound(1000, 200, 180, beta=0.01) < mu_lower_bound(1000, 200, 180, beta=0.1)
    with pytest.raises(ValueError, match="v <= k <= m"):
        mu_lower_bound(10, 5, 6)
    with pytest.raises(ValueError, match="beta"):
        mu_lower_bound(10, 5, 5, beta=0.0)


def _gdp_delta_reference(mu, eps):
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu, delta", [(0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-6), (4.0, 1e-3),
                                       (0.1, 1e-2)])
def test_gdp_epsilon_solves_the_gdp_curve(mu, delta):
    eps = gdp_epsilon(mu, delta)
    want = mpmath.findroot(lambda e: _gdp_delta_reference(mu, e) - delta, eps + 0.01)
    # brentq to xtol 1e-12 on a function whose slope is O(delta): 1e-8 relative is ample
    assert eps == pytest.approx(float(want), rel=1e-8)
    assert gdp_mu(eps, delta) == pytest.approx(mu, rel=1e-8)
    assert gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-6)


def test_gdp_conversion_edges():
    assert gdp_epsilon(0.0, 1e-5) == 0.0 and gdp_epsilon(math.inf, 1e-5) == math.inf
    assert gdp_mu(math.inf, 1e-5) == math.inf and gdp_mu(0.0, 1e-5) == 0.0
    assert gdp_epsilon(0.01, 0.1) == 0.0  # delta(0) = 2 Phi(mu/2) - 1 = 0.004 <= 0.1
    # Dong, Roth & Su's example: 1-GDP is (eps, delta)-DP with eps ~ 4.38 at delta 1e-5
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.3772, abs=1e-4)
    with pytest.raises(ValueError, match="delta"):
        gdp_epsilon(1.0, 0.0)


def test_guess_candidates_fixed_and_within_the_canaries():
    assert guess_candidates(1000) == [(16, 16), (32, 0), (31, 31), (62, 0), (62, 62),
                                      (124, 0), (125, 125), (250, 0), (250, 250), (500, 0)]
    assert all(a + b <= 4 for a, b in guess_candidates(4)) and guess_candidates(4)[0] == (1, 1)


def _gaussian_canaries(mu, m, rng):
    """A mu-GDP mechanism per canary: its score is N(mu, 1) when included, N(0, 1) when
    not -- the Gaussian mechanism with sensitivity mu and unit noise (tight for mu-GDP)."""
    inc = rng.random(m) < 0.5
    return rng.standard_normal(m) + mu * inc, inc


def test_the_bound_is_valid_on_a_simulated_gdp_mechanism():
    """At the true mu the recursion rejects in at most beta of the runs (it is conservative:
    measured 8 of 1000 at (mu 1, k 31+31), so 400 runs stay far from 5% + 3 sd)."""
    rng = np.random.default_rng(1)
    rejected = 0
    for _ in range(400):
        s, inc = _gaussian_canaries(1.0, 1000, rng)
        r, v = correct_guesses(guesses(s, 31, 31), inc)
        rejected += fdp_rejects(1000, r, v, 1.0, 0.05)
    assert rejected / 400 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)


def test_search_keeps_the_largest_bound_at_the_corrected_level():
    rng = np.random.default_rng(0)
    s, inc = _gaussian_canaries(2.0, 1000, rng)
    g = search_guesses(s, inc, delta=1e-5, beta=0.05)
    assert g.candidates == 10 and g.beta_each == pytest.approx(0.005)
    per = []
    for kp, km in guess_candidates(1000):
        r, v = correct_guesses(guesses(s, kp, km), inc)
        per.append(mu_lower_bound(1000, r, v, beta=0.005))
    assert g.mu_lower_bound == max(per)
    assert (g.k_plus, g.k_minus) == guess_candidates(1000)[int(np.argmax(per))]
    # below the true mu = 2 (the bound is valid) and tighter than half of it on 1000 canaries
    assert 0.7 < g.mu_lower_bound < 2.0
    assert g.epsilon_lower_bound_gdp == pytest.approx(gdp_epsilon(g.mu_lower_bound, 1e-5))
    # the Gaussian-DP analysis gets more out of the same guesses than Steinke's epsilon
    assert g.epsilon_lower_bound_gdp > g.epsilon_lower_bound_steinke


def test_summary_flags_every_exceeded_bound():
    rng = np.random.default_rng(0)
    s, inc = _gaussian_canaries(4.0, 1000, rng)
    out, guess = audit_summary(s, inc, k_plus=250, k_minus=250, delta=1e-5, beta=0.05,
                               claimed_epsilon=2.0, level="gradient", attack="projection")
    assert out["claimed_mu"] == pytest.approx(gdp_mu(2.0, 1e-5))
    assert out["epsilon_lower_bound"] > 2.0 and out["epsilon_lower_bound_gdp"] > 2.0
    assert out["exceeded_by"] == ["epsilon_lower_bound", "epsilon_lower_bound_gdp"]
    assert out["exceeds_claimed"] and len(guess) == 1000
    msg = warning_message(out, "the clients' updates")
    assert msg.startswith("DP AUDIT FAILED on the clients' updates: the Steinke")
    assert "Gaussian-DP epsilon lower bound" in msg
    honest, _ = audit_summary(s, inc, k_plus=250, k_minus=250, delta=1e-5, beta=0.05,
                              claimed_epsilon="inf", level="gradient", attack="projection")
    assert honest["claimed_mu"] == "inf" and not honest["exceeds_claimed"]
