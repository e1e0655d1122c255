"""DP auditing with one run (fedaudit.dp_audit): the epsilon lower bound against an
independent exact binomial tail, the canary draw and the guesses."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fedaudit.dp_audit import audit_p_value, epsilon_lower_bound
from fedaudit.dp_audit.canaries import (correct_guesses, draw_inclusion, draw_sample_canaries,
                                        guesses)


def _tail(r: int, v: int, q: float) -> float:
    """P[Binomial(r, q) >= v] by the sum of math.comb terms (independent of scipy)."""
    return sum(math.comb(r, k) * q ** k * (1 - q) ** (r - k) for k in range(v, r + 1))


def _p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The paper's p-value written out term by term (tail + 2 m delta max_i P[v-i<=B<v]/i)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    pmf = [math.comb(r, k) * q ** k * (1 - q) ** (r - k) for k in range(r + 1)]
    alpha = max((sum(pmf[v - i:v]) / i for i in range(1, v + 1)), default=0.0)
    return min(1.0, _tail(r, v, q) + 2 * m * delta * alpha)


# float64 sums of <= a few hundred terms of size <= 1: relative error ~1e-13; 1e-9 is far
# above it and far below any difference the tests look at
TOL = 1e-9


@pytest.mark.parametrize("r", [1, 5, 20, 100])
@pytest.mark.parametrize("beta", [0.05, 0.01])
def test_all_correct_without_delta_is_the_closed_form(r, beta):
    # P[B(r, q) >= r] = q^r = beta  ->  q = beta^(1/r), eps = log(q / (1 - q))
    q = beta ** (1 / r)
    want = max(0.0, math.log(q / (1 - q)))
    assert epsilon_lower_bound(r, r, r, delta=0.0, beta=beta) == pytest.approx(want, abs=1e-8)


@pytest.mark.parametrize("m, r, v", [(10, 10, 9), (30, 20, 17), (200, 60, 50), (50, 7, 7)])
@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-3])
def test_bound_is_where_the_exact_p_value_crosses_beta(m, r, v, delta):
    beta = 0.05
    eps = epsilon_lower_bound(m, r, v, delta=delta, beta=beta)
    assert eps > 0
    assert _p_value(m, r, v, eps, delta) == pytest.approx(beta, abs=1e-7)
    # just below the bound the hypothesis is rejected, just above it is not
    assert _p_value(m, r, v, eps - 1e-4, delta) < beta < _p_value(m, r, v, eps + 1e-4, delta)


def test_p_value_hand_computed_with_delta():
    # m = 4, r = v = 2, eps = 0 (q = 1/2): tail = 1/4;
    # alpha = max(P[B=1] / 1, P[B in {0,1}] / 2) = max(1/2, 3/8) = 1/2;  p = 1/4 + 2*4*d/2
    for d in (0.0, 0.01, 0.1):
        want = float(Fraction(1, 4) + 4 * Fraction(d))
        assert audit_p_value(4, 2, 2, 0.0, d) == pytest.approx(want, abs=TOL)
    assert audit_p_value(4, 2, 2, 0.0, 0.5) == 1.0  # capped


def test_p_value_matches_the_term_by_term_reference():
    for m, r, v, eps, d in [(100, 40, 31, 0.7, 1e-4), (12, 12, 3, 2.0, 0.01),
                            (500, 300, 280, 3.0, 1e-5)]:
        assert audit_p_value(m, r, v, eps, d) == pytest.approx(_p_value(m, r, v, eps, d),
                                                               rel=1e-9, abs=1e-300)


def test_bound_monotone():
    m, r = 200, 100
    by_v = [epsilon_lower_bound(m, r, v) for v in range(50, 101, 5)]
    assert all(a <= b for a, b in zip(by_v, by_v[1:])) and by_v[-1] > by_v[0]
    by_delta = [epsilon_lower_bound(m, r, 90, delta=d) for d in (0.0, 1e-6, 1e-4, 1e-3)]
    assert all(a >= b for a, b in zip(by_delta, by_delta[1:])) and by_delta[-1] < by_delta[0]
    by_beta = [epsilon_lower_bound(m, r, 90, beta=b) for b in (0.001, 0.01, 0.05, 0.2)]
    assert all(a <= b for a, b in zip(by_beta, by_beta[1:]))
    # more all-correct guesses: more evidence
    assert epsilon_lower_bound(m, 50, 50) < epsilon_lower_bound(m, 100, 100)


def test_bound_edge_cases():
    assert epsilon_lower_bound(10, 0, 0) == 0.0  # no guesses: no evidence
    assert epsilon_lower_bound(10, 10, 0) == 0.0  # every guess wrong
    assert epsilon_lower_bound(10, 10, 5) == 0.0  # chance
    assert epsilon_lower_bound(4, 4, 4) == 0.0  # 1/16 > 0.05: not even eps = 0 rejected
    assert math.isfinite(epsilon_lower_bound(1000, 1000, 1000, delta=1e-5))
    for args in [(10, 5, 6), (10, 11, 3), (-1, 0, 0), (10, 5, 2.5)]:
        with pytest.raises(ValueError):
            epsilon_lower_bound(*args)
    with pytest.raises(ValueError, match="beta"):
        epsilon_lower_bound(10, 10, 10, beta=0.0)
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound(10, 10, 10, delta=2.0)


def test_canary_draw_half_included_and_reproducible():
    pool = np.arange(100, 5100, dtype=np.int64)
    y = np.arange(6000) % 10
    a = draw_sample_canaries(pool, y, 2000, num_clients=5, num_classes=10, seed=3)
    b = draw_sample_canaries(pool, y, 2000, num_clients=5, num_classes=10, seed=3)
    c = draw_sample_canaries(pool, y, 2000, num_clients=5, num_classes=10, seed=4)
    for f in ("ids", "included", "client", "label"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.included, c.included)
    # Binomial(2000, 1/2): sd = 22.4; 5 sd holds for any seed with overwhelming probability
    assert abs(int(a.included.sum()) - 1000) < 5 * math.sqrt(2000 / 4)
    assert len(np.unique(a.ids)) == 2000 and np.isin(a.ids, pool).all()
    assert np.all(a.label != y[a.ids]) and np.all((a.label >= 0) & (a.label < 10))
    assert np.array_equal(a.client >= 0, a.included)
    assert set(a.client[a.included].tolist()) == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError):
        draw_sample_canaries(pool, y, len(pool) + 1, num_clients=5, num_classes=10, seed=0)


def test_inclusion_coins():
    a = draw_inclusion(10_000, [1, 2])
    assert np.array_equal(a, draw_inclusion(10_000, [1, 2]))
    assert abs(int(a.sum()) - 5000) < 5 * 50  # sd 50


def test_guesses_and_correct_counts_by_hand():
    scores = np.array([0.9, -1.0, 0.1, 3.0, -2.0, 0.5])
    g = guesses(scores, k_plus=2, k_minus=1)
    assert g.tolist() == [1, 0, 0, 1, -1, 0]
    included = np.array([True, False, True, False, False, True])
    # +1 on 0 (in: right), +1 on 3 (out: wrong), -1 on 4 (out: right)
    assert correct_guesses(g, included) == (3, 2)
    assert guesses(scores, 0, 0).tolist() == [0] * 6
    assert guesses(scores, 6, 0).tolist() == [1] * 6
    # ties: stable order, deterministic
    assert guesses(np.zeros(4), 1, 1).tolist() == [-1, 0, 0, 1]
    with pytest.raises(ValueError, match="k_plus"):
        guesses(scores, 4, 3)
    with pytest.raises(ValueError, match="score 1"):
        guesses(np.array([0.0, np.nan]), 1, 0)
