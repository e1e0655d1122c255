"""fedaudit.verdicts' rule on explicit estimates: Holm's adjusted p-values worked by hand,
the four outcomes, the most exposed client, the units an inconclusive cell needs, and the
clustered mean against Student's t where each cluster holds one value."""

import math

import numpy as np
import pytest
from scipy import stats

from fedaudit.verdicts import (Estimate, Rule, clustered_mean, clustered_ratio, decide, holm,
                               leak_flags, legacy_outcome, units_needed)

AUC = Rule(0.05, True, "AUC")
GAIN = Rule(0.05, False, "gain")


def _e(figure, interval, p_above, p_below=None, scope="pooled", units=100, chance=0.5):
    return Estimate(figure, interval, chance, p_above,
                    1 - p_above if p_below is None and p_above is not None else p_below,
                    "t", "client", units, scope=scope)


def test_holm_by_hand():
    """Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04, then the
    running maximum: 0.02, 0.03, 0.06, 0.06."""
    assert holm([0.01, 0.04, None, 0.03, 0.005]) == pytest.approx(
        [0.03, 0.06, None, 0.06, 0.02])
    assert holm([0.5]) == [0.5] and holm([None]) == [None]
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_the_four_outcomes():
    # leaks: the one-sided test rejects at 2.5 %
    assert decide(AUC, _e(0.6, (0.55, 0.65), 1e-4)).outcome == "leaks"
    # an AUC significantly below 0.5 leaks with the score flipped (two-sided families)
    inv = _e(0.4, (0.35, 0.45), 0.9999, 1e-4)
    assert decide(AUC, inv).outcome == "leaks (inverted score)"
    # ... but a gain below its chance level is no leak (one-sided families)
    below = _e(-0.2, (-0.25, -0.15), 0.9999, 1e-4, chance=0.0)
    assert decide(GAIN, below).outcome == "no leak beyond delta"
    # no leak beyond delta: the whole interval within chance +- delta
    assert decide(AUC, _e(0.51, (0.47, 0.55), 0.2)).outcome == "no leak beyond delta"
    # inconclusive: the interval reaches past delta, and no test rejects
    v = decide(AUC, _e(0.55, (0.45, 0.65), 0.16, units=64))
    assert v.outcome == "inconclusive" and v.needed == units_needed(v.headline, AUC)
    # half-width 0.1 must fall below max(0.05, 0.05 - 0.05) = 0.05: 4 times the units
    assert v.needed == 256 and "about 256 clients would resolve it, 64 now" in v.summary()
    # no interval at all: never shown safe
    assert decide(AUC, _e(0.5, None, 0.5)).outcome == "inconclusive"
    # ... nor when one client has none: the pooled interval cannot speak for it
    lone = _e(0.5, None, 0.5, scope="client 3")
    v = decide(AUC, _e(0.51, (0.47, 0.55), 0.2), [lone])
    assert v.outcome == "inconclusive" and v.estimates[v.deciding].scope == "client 3"
    assert "no interval from 100 client(s)" in v.summary()


def test_the_most_exposed_client_decides_and_holm_counts_every_look():
    pooled = _e(0.51, (0.49, 0.53), 0.2)
    calm = [_e(0.5, (0.46, 0.54), 0.5, scope=f"client {k}") for k in range(9)]
    exposed = _e(0.9, (0.7, 1.0), 0.002, scope="client 9", units=8)
    v = decide(AUC, pooled, [*calm, exposed])
    # 0.002 * 11 = 0.022 < 0.025: the client leaks after Holm over the 11 estimates
    assert v.outcome == "leaks" and v.estimates[v.deciding].scope == "client 9"
    d = v.as_dict()
    assert d["tests"] == 11 and d["leaking_clients"] == 1 and d["clients"] == 10
    assert d["worst_client"]["scope"] == "client 9"
    assert d["worst_client"]["p_adjusted"] == pytest.approx(0.022)
    assert "leaks (client 9), p = 0.022 after Holm over 11" == v.summary()
    # with 13 looks the same client no longer clears the bar (0.002 * 13 = 0.026):
    # inconclusive, and the client's wide interval is what blocks "no leak"
    more = [_e(0.5, (0.46, 0.54), 0.5, scope=f"client {k}") for k in (10, 11)]
    v13 = decide(AUC, pooled, [*calm, exposed, *more])
    assert v13.outcome == "inconclusive" and v13.estimates[v13.deciding].scope == "client 9"
    assert leak_flags(AUC, [pooled, *calm, exposed]) == [None] * 10 + ["leaks"]


def test_old_verdict_words_are_read_conservatively():
    assert legacy_outcome("above chance") == "leaks"
    assert legacy_outcome("not distinguishable from chance") == "inconclusive"
    assert legacy_outcome("below chance") == "inconclusive"
    assert legacy_outcome("no leak beyond delta") == "no leak beyond delta"
    assert legacy_outcome(None) is None and legacy_outcome("what") is None


def test_clustered_mean_with_one_value_per_cluster_is_students_t():
    g = np.random.default_rng(0)
    y = g.normal(0.3, 1.0, 15)
    e = clustered_mean(y, np.arange(15), chance=0.0, unit="image")
    res = stats.ttest_1samp(y, 0.0, alternative="greater")
    ci = stats.ttest_1samp(y, 0.0).confidence_interval(0.95)
    # the same t statistic from two formulas: float64 to ~1e-12
    assert e.p_above == pytest.approx(res.pvalue, rel=1e-9)
    assert e.interval == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert e.units == 15 and e.method == "clustered by image (t, 14 df)"


def test_clustered_ratio_by_hand():
    """Cluster totals Y = (1, 3), W = (4, 4): theta = 1/2, Var = 2 ((1 - 2)^2 + (3 - 2)^2) /
    8^2 = 1/16, t on 1 df; one cluster: no interval; equal values: the point."""
    e = clustered_ratio([1, 3], [4, 4], [0, 1], chance=0.0, unit="client")
    half = stats.t.ppf(0.975, 1) * 0.25
    assert e.figure == 0.5 and e.interval == pytest.approx((0.5 - half, 0.5 + half))
    assert e.p_above == pytest.approx(stats.t.sf(2.0, 1))
    one = clustered_ratio([1, 3], [4, 4], [0, 0], chance=0.0, unit="client")
    assert one.interval is None and one.p_above is None and one.units == 1
    flat = clustered_mean([0.0] * 6, [0, 0, 1, 1, 2, 2], chance=0.0, unit="client")
    assert flat.interval == (0.0, 0.0) and flat.p_above == 1.0
    assert decide(GAIN, flat).outcome == "no leak beyond delta"
    with pytest.raises(ValueError, match="index 1 is nan"):
        clustered_mean([0.0, math.nan], [0, 1], chance=0.0, unit="client")
