"""fedaudit.verdicts.auc against independent references: the exact Mann-Whitney p-values
against every arrangement of the samples counted by brute force, Newcombe's interval
against its defining equation, Obuchowski's clustered variance against the paper's
formula written from the O(m n) kernel, and the cluster permutation test against every
arrangement of the clients."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from fedaudit.metrics import auc_interval
from fedaudit.verdicts import Rule, auc_estimate, decide
from fedaudit.verdicts.auc import (PERMUTATIONS, newcombe_interval, obuchowski_variance)

RULE = Rule(0.05, True, "AUC")


def _auc(x, y):
    return ((x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])).mean()


def _enumerated(scores, members):
    """P(AUC >= observed) and P(AUC <= observed) over every choice of which samples are the
    members, each equally likely under chance."""
    s, m = np.asarray(scores, float), np.asarray(members, bool)
    obs, k = _auc(s[m], s[~m]), int(m.sum())
    aucs = []
    for pos in itertools.combinations(range(len(s)), k):
        mask = np.zeros(len(s), bool)
        mask[list(pos)] = True
        aucs.append(_auc(s[mask], s[~mask]))
    aucs = np.array(aucs)
    return (aucs >= obs - 1e-12).mean(), (aucs <= obs + 1e-12).mean()


@pytest.mark.parametrize("seed, m, n, ties", [(0, 3, 3, False), (1, 2, 5, False),
                                              (2, 6, 4, False), (3, 4, 4, True),
                                              (4, 5, 7, True), (5, 8, 8, True)])
def test_small_samples_get_the_exact_test(seed, m, n, ties):
    g = np.random.default_rng(seed)
    scores = g.integers(0, 4, m + n).astype(float) if ties else g.normal(size=m + n)
    members = np.r_[np.ones(m), np.zeros(n)].astype(int)
    e = auc_estimate(scores, members)
    up, down = _enumerated(scores, members)
    # exact: a ratio of counts, to the last few bits
    assert e.p_above == pytest.approx(up, rel=1e-9) and e.p_below == pytest.approx(down, rel=1e-9)
    assert e.unit == "sample" and e.units == m + n and "Newcombe" in e.method


def test_with_many_tied_arrangements_the_test_draws_them_within_its_error():
    """9 vs 9 with ties: C(18, 9) = 48,620 arrangements, more than the test enumerates; its
    seeded draws land within 5 standard errors of the enumerated p."""
    g = np.random.default_rng(7)
    scores = g.integers(0, 5, 18).astype(float) + np.r_[np.full(9, 0.8), np.zeros(9)].round()
    members = np.r_[np.ones(9), np.zeros(9)].astype(int)
    e = auc_estimate(scores, members)
    up, _ = _enumerated(scores, members)
    assert "permutation" in e.method
    assert abs(e.p_above - up) <= 5 * math.sqrt(up * (1 - up) / PERMUTATIONS) + 1e-4


def test_a_perfect_ranking_of_three_against_three_is_not_a_leak():
    """The exact p of a perfect 3-vs-3 ranking is 1 / C(6, 3) = 1/20 on its side, above
    2.5 %: DeLong's point interval [1, 1] called it a leak."""
    members = np.array([1, 1, 1, 0, 0, 0])
    e = auc_estimate(np.array([6.0, 5, 4, 3, 2, 1]), members)
    assert e.figure == 1.0 and e.p_above == pytest.approx(1 / 20)
    assert e.interval[0] < 0.5 < e.interval[1] == 1.0
    assert decide(RULE, e).outcome == "inconclusive"
    # 2 vs 2: p = 1/6
    assert auc_estimate(np.array([4.0, 3, 2, 1]), np.array([1, 1, 0, 0])).p_above == \
        pytest.approx(1 / 6)
    # with 50 of each class DeLong's interval, as before, and the Mann-Whitney test's normal
    # approximation: U = AUC m n, mean m n / 2, variance m n (m + n + 1) / 12 without ties,
    # continuity-corrected
    g = np.random.default_rng(0)
    s, mem = g.normal(size=100), np.repeat([1, 0], 50)
    big = auc_estimate(s, mem)
    assert big.method.endswith("DeLong's interval") and big.interval == auc_interval(s, mem)
    u, sd = big.figure * 2500, math.sqrt(2500 * 101 / 12)
    assert big.p_above == pytest.approx(stats.norm.sf((u - 1250 - 0.5) / sd), rel=1e-9)
    assert big.p_below == pytest.approx(stats.norm.cdf((u - 1250 + 0.5) / sd), rel=1e-9)


@pytest.mark.parametrize("auc, m, n", [(1.0, 3, 3), (0.5, 3, 3), (0.8, 10, 12), (0.0, 4, 6),
                                       (0.62, 40, 45)])
def test_newcombes_interval_solves_its_equation(auc, m, n):
    lo, hi = newcombe_interval(auc, m, n)
    z, c, star = 1.959963984540054, 1 / (2 * m * n), (m + n) / 2

    def sd(t):
        return math.sqrt(t * (1 - t) * (1 + (star - 1) * (1 - t) / (2 - t)
                                        + (star - 1) * t / (1 + t)) / (m * n))

    assert 0 <= lo <= auc <= hi <= 1
    if lo > 0:  # brentq to 1e-14 in theta: the equation holds to ~1e-12
        assert (auc - c - lo) == pytest.approx(z * sd(lo), abs=1e-10)
    if hi < 1:
        assert (hi - auc - c) == pytest.approx(z * sd(hi), abs=1e-10)
    # at theta = 1/2 the variance is the exact null variance of the AUC
    assert sd(0.5) ** 2 == pytest.approx((m + n + 1) / (12 * m * n), rel=1e-12)


def _obuchowski_naive(s, member, cl):
    """Obuchowski 1997, equations (2)-(5), from the O(m n) kernel and explicit loops."""
    X = [(c, v) for v, mm, c in zip(s, member, cl) if mm]
    Y = [(c, v) for v, mm, c in zip(s, member, cl) if not mm]
    M, N = len(X), len(Y)

    def psi(a, b):
        return 1.0 if a > b else 0.5 if a == b else 0.0

    A = sum(psi(x, y) for _, x in X for _, y in Y) / (M * N)
    ks = sorted(set(cl))
    V10 = {k: sum(sum(psi(x, y) for _, y in Y) / N for c, x in X if c == k) for k in ks}
    V01 = {k: sum(sum(psi(x, y) for _, x in X) / M for c, y in Y if c == k) for k in ks}
    mk = {k: sum(c == k for c, _ in X) for k in ks}
    nk = {k: sum(c == k for c, _ in Y) for k in ks}
    I10, I01, I = sum(mk[k] > 0 for k in ks), sum(nk[k] > 0 for k in ks), len(ks)
    S10 = I10 / ((I10 - 1) * M) * sum((V10[k] - mk[k] * A) ** 2 for k in ks)
    S01 = I01 / ((I01 - 1) * N) * sum((V01[k] - nk[k] * A) ** 2 for k in ks)
    S11 = I / (I - 1) * sum((V10[k] - mk[k] * A) * (V01[k] - nk[k] * A) for k in ks)
    return A, S10 / M + S01 / N + 2 * S11 / (M * N)


@pytest.mark.parametrize("seed", range(6))
def test_obuchowskis_variance_against_the_papers_formula(seed):
    g = np.random.default_rng(seed)
    k = int(g.integers(4, 9))
    cl = np.repeat(np.arange(k), g.integers(2, 6, k))
    member = g.random(len(cl)) < 0.5
    member[:2] = [True, False]
    s = g.integers(0, 6, len(cl)).astype(float) + 0.3 * member  # ties too
    auc, var, kk = obuchowski_variance(s, member.astype(int), cl)
    a_ref, v_ref = _obuchowski_naive(s, member, cl)
    # sums of a few hundred halves and ones, then O(1) arithmetic: float64 to ~1e-13
    assert kk == k and auc == pytest.approx(a_ref, abs=1e-13)
    assert var == pytest.approx(v_ref, rel=1e-10, abs=1e-15)


def test_one_unit_per_cluster_is_delong():
    g = np.random.default_rng(9)
    s, mem = g.normal(size=60), np.repeat([1, 0], 30)
    auc, var, _ = obuchowski_variance(s, mem, np.arange(60))
    lo, hi = auc_interval(s, mem)
    assert math.sqrt(var) * 1.959963984540054 == pytest.approx((hi - lo) / 2, rel=1e-12)


def test_clients_of_one_class_get_the_cluster_permutation_test():
    """8 clients of 3 updates, 3 clients with the property: C(8, 3) = 56 arrangements, each
    recomputed here from the kernel."""
    g = np.random.default_rng(4)
    cl = np.repeat(np.arange(8), 3)
    has = np.isin(cl, [1, 4, 6])
    s = g.normal(size=24) + 0.6 * has
    e = auc_estimate(s, has.astype(int), cl)
    obs = _auc(s[has], s[~has])
    aucs = []
    for pick in itertools.combinations(range(8), 3):
        mask = np.isin(cl, pick)
        aucs.append(_auc(s[mask], s[~mask]))
    aucs = np.array(aucs)
    assert e.figure == pytest.approx(obs, abs=1e-14)
    assert e.p_above == pytest.approx((aucs >= obs - 1e-12).mean(), rel=1e-12)
    assert e.unit == "client" and e.units == 8 and "every arrangement" in e.method
    # the interval is Obuchowski's with t on K - 1 = 7 degrees of freedom
    a, var, _ = obuchowski_variance(s, has.astype(int), cl)
    half = stats.t.ppf(0.975, 7) * math.sqrt(var)
    assert e.interval == pytest.approx((max(0, a - half), min(1, a + half)), abs=1e-12)


def test_mixed_clusters_use_obuchowski_with_t():
    g = np.random.default_rng(5)
    cl = np.repeat(np.arange(6), 10)
    mem = np.tile(np.r_[np.ones(5), np.zeros(5)], 6).astype(int)
    s = g.normal(size=60) + np.repeat(g.normal(size=6), 10)
    e = auc_estimate(s, mem, cl)
    a, var, _ = obuchowski_variance(s, mem, cl)
    assert e.method == "Obuchowski, clustered by client (t, 5 df)"
    assert e.p_above == pytest.approx(stats.t.sf((a - 0.5) / math.sqrt(var), 5), rel=1e-12)
    # one cluster holding the members: no variance, no test, no interval
    lone = auc_estimate(s[:20], np.r_[np.ones(10), np.zeros(10)].astype(int),
                        np.r_[np.zeros(10), np.arange(1, 11)])
    assert lone.interval is None and lone.p_above is None
