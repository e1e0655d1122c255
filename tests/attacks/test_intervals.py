"""fedaudit.intervals against independent references: DeLong's placements from the
O(m n) definition, its variance on a case worked by hand, Clopper-Pearson's bounds
against the binomial tails they are defined by (scipy.stats), and the verdicts on a
perfect, a random and a small-sample attack."""

import math

import numpy as np
import pytest
from scipy import stats

from fedaudit.intervals import (ABOVE, BELOW, UNDISTINGUISHED, clopper_pearson,
                                threshold_verdict)
from fedaudit.verdicts import Estimate
from fedaudit.metrics import auc_interval, delong_placements, membership_metrics
from fedaudit.verdicts.ranks import midranks as _midranks


def _naive_placements(scores, members):
    x, y = scores[members == 1], scores[members == 0]
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    return psi.mean(axis=1), psi.mean(axis=0)


@pytest.mark.parametrize("seed", range(20))
def test_placements_equal_the_definition_ties_included(seed):
    g = np.random.default_rng(seed)
    n = int(g.integers(2, 60))
    members = g.integers(0, 2, n)
    members[:2] = [0, 1]
    scores = g.integers(0, 6, n).astype(float)  # many ties
    v10, v01 = delong_placements(scores, members)
    n10, n01 = _naive_placements(scores, members)
    # midrank differences of integers and halves, one division: within an ulp of the
    # naive means (float64, values in [0, 1])
    np.testing.assert_allclose(v10, n10, rtol=0, atol=4e-16)
    np.testing.assert_allclose(v01, n01, rtol=0, atol=4e-16)
    assert math.isclose(v10.mean(), membership_metrics(scores, members)["auc"],
                        rel_tol=0, abs_tol=1e-15)
    assert np.array_equal(_midranks(scores), stats.rankdata(scores))


def test_auc_interval_on_a_case_worked_by_hand():
    """Members 0.9, 0.6, 0.4; non-members 0.5, 0.3: psi rows (1, 1), (1, 1), (0, 1), so
    V10 = (1, 1, 1/2), V01 = (2/3, 1), AUC = 5/6; S10 = var(1, 1, 1/2) = 1/12,
    S01 = var(2/3, 1) = 1/18; Var = (1/12) / 3 + (1/18) / 2 = 1/18."""
    scores = np.array([0.9, 0.6, 0.4, 0.5, 0.3])
    members = np.array([1, 1, 1, 0, 0])
    lo, hi = auc_interval(scores, members)
    half = stats.norm.ppf(0.975) * math.sqrt(1 / 18)
    assert math.isclose(lo, 5 / 6 - half, abs_tol=1e-12) and hi == 1.0  # cut at 1
    assert lo < 0.5 < hi  # 5 samples say little


def test_a_perfect_a_random_and_an_inverted_attack():
    g = np.random.default_rng(0)
    members = np.repeat([1, 0], 200)
    perfect = np.r_[g.uniform(1, 2, 200), g.uniform(0, 1, 200)]
    assert auc_interval(perfect, members) == (1.0, 1.0)  # zero variance: the point
    assert auc_interval(-perfect, members) == (0.0, 0.0)
    # random scores: over 200 draws the 95 % interval holds 0.5 in about 95 % of them
    # (binomial sd of the count about 3; 170 is 8 sd below 190)
    held = sum(lo <= 0.5 <= hi for lo, hi in (auc_interval(g.normal(size=400), members)
                                              for _ in range(200)))
    assert held >= 170
    # with one sample of a class the variance is undefined: no information
    assert auc_interval(np.array([1.0, 0.5, 0.2]), np.array([1, 0, 0])) == (0.0, 1.0)


@pytest.mark.parametrize("k, n", [(0, 10), (1, 10), (5, 10), (10, 10), (3, 200), (0, 1),
                                  (1, 1), (37, 64)])
def test_clopper_pearson_bounds_are_the_binomial_tails(k, n):
    lo, hi = clopper_pearson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    # P(X >= k | lo) = 0.025 and P(X <= k | hi) = 0.025 (float64 quantiles: 1e-9)
    if k > 0:
        assert math.isclose(stats.binom.sf(k - 1, n, lo), 0.025, abs_tol=1e-9)
    else:
        assert lo == 0.0
    if k < n:
        assert math.isclose(stats.binom.cdf(k, n, hi), 0.025, abs_tol=1e-9)
    else:
        assert hi == 1.0
    assert clopper_pearson(0, 10)[1] == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)


def test_bad_input_fails_precisely():
    with pytest.raises(ValueError, match="k = 11, n = 10"):
        clopper_pearson(11, 10)
    with pytest.raises(ValueError, match="level = 1.5"):
        clopper_pearson(1, 10, level=1.5)
    with pytest.raises(ValueError, match="k = 1.5"):
        clopper_pearson(1.5, 10)
    with pytest.raises(ValueError, match="needs low <= high"):
        Estimate(0.5, (0.6, 0.4), 0.5, None, None, "", "sample", 2)
    with pytest.raises(ValueError):
        auc_interval(np.array([1.0, np.nan]), np.array([1, 0]))


def test_membership_metrics_carry_their_intervals_and_verdicts():
    """200 members, 300 non-members: a perfect attack and one that flags exactly 5 members
    above every non-member and is random otherwise."""
    from fedaudit.metrics import MembershipMetrics

    g = np.random.default_rng(1)
    members = np.repeat([1, 0], [200, 300])
    perfect = MembershipMetrics.of(np.r_[g.uniform(1, 2, 200), g.uniform(0, 1, 300)], members)
    d = perfect.as_dict()
    assert list(d)[:5] == ["auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "fpr_at_80pct_tpr",
                           "min_fpr_resolution"]  # the keys results.json always had, first
    assert d["auc_ci"] == [1.0, 1.0] and d["n_members"] == 200 and d["ci_level"] == 0.95
    assert d["tpr_at_1pct_fpr_ci"] == list(clopper_pearson(200, 200))
    assert d["verdict"] == {"auc": "leaks", "tpr_at_1pct_fpr": "leaks",
                            "tpr_at_0p1pct_fpr": "leaks"}
    assert d["auc_test"]["method"].endswith("DeLong's interval")
    assert d["auc_test"]["units"] == 500
    scores = np.r_[np.full(5, 10.0), g.uniform(0, 1, 195), g.uniform(0, 1, 300)]
    few = MembershipMetrics.of(scores, members)
    assert few.tpr_at_0p1pct_fpr == 5 / 200  # 1/300 > 0.001: the TPR at FPR = 0
    assert few.tpr_at_0p1pct_fpr_ci == clopper_pearson(5, 200)
    # 5 of 200 members above all 300 non-members: P(K >= 5) = C(200, 5) / C(500, 5) = 0.010
    assert few.verdicts()["tpr_at_0p1pct_fpr"] == "leaks"
    # its AUC is 0.5-ish with an interval of +-0.05: not shown safe, not a leak
    assert few.verdicts()["auc"] == "inconclusive"
    assert few.auc_ci == auc_interval(scores, members, few.auc)
    # a record built from numbers alone has no intervals and says so
    bare = MembershipMetrics(0.6, 0.1, 0.0, 0.5, 0.01)
    assert bare.verdicts() is None and "auc_ci" not in bare.as_dict()


def _tail_by_enumeration(k, j, m, n):
    """P(K >= k) and P(K <= k) over every arrangement of m members and n non-members (all
    equally likely under chance), K = members ranked above the (j + 1)-th non-member."""
    from itertools import combinations

    ge = le = total = 0
    for pos in combinations(range(m + n), m):  # the members' ranks
        ranks = set(pos)
        seen_non, count = 0, 0
        for r in range(m + n):
            if r in ranks:
                count += 1
            else:
                seen_non += 1
                if seen_non == j + 1:
                    break
        ge, le, total = ge + (count >= k), le + (count <= k), total + 1
    return ge / total, le / total


@pytest.mark.parametrize("m, n", [(3, 4), (5, 3), (4, 6)])
def test_threshold_verdict_uses_the_exact_tails(m, n, monkeypatch):
    """The hypergeometric tails equal the enumeration of every arrangement; the verdict
    turns where a tail crosses 2.5 %."""
    from scipy.stats import hypergeom

    for j in range(n):
        for k in range(m + 1):
            ge, le = _tail_by_enumeration(k, j, m, n)
            assert math.isclose(hypergeom.sf(k - 1, m + n, m, k + j) if k else 1.0, ge,
                                abs_tol=1e-12)
            if k + j + 1 <= m + n:
                assert math.isclose(hypergeom.cdf(k, m + n, m, k + j + 1), le, abs_tol=1e-12)
            want = ABOVE if ge < 0.025 else BELOW if le < 0.025 else UNDISTINGUISHED
            assert threshold_verdict(k, j, m, n) == want


def test_tpr_verdicts_hold_their_level_where_the_members_interval_does_not():
    """400 random attacks on 200 members and 300 non-members: the exact test calls at most
    5 % of them above chance at either FPR bound (its level is 2.5 %; binomial sd of the
    count about 3, so 20 is 3 sd above 10).  Clopper-Pearson's lower bound on the members
    against the bound would have called about 10 % at 1 % FPR and 14 % at 0.1 % (measured
    on these draws), because the threshold is chosen on the same non-members."""
    from fedaudit.metrics import MembershipMetrics

    g = np.random.default_rng(2)
    members = np.repeat([1, 0], [200, 300])
    above = {"tpr_at_1pct_fpr": 0, "tpr_at_0p1pct_fpr": 0}
    naive = 0
    for _ in range(400):
        mm = MembershipMetrics.of(g.normal(size=500), members)
        for key in above:
            above[key] += mm.verdicts()[key] == "leaks"
        naive += mm.tpr_at_1pct_fpr_ci[0] > 0.01
    assert max(above.values()) <= 20, above
    assert naive > 30  # the shortcut this test guards against
