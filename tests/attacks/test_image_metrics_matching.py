"""fedaudit.image_metrics: the optimal matching (against brute force, where greedy fails),
identifiability, the prior leakage (NVFlare's relative data leakage) and the combined
record, on explicit images."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats
import pytest

from fedaudit.image_metrics import (
    ReconstructionMetrics,
    identifiability,
    match,
    prior_leakage,
    psnr,
    reconstruction_metrics,
    ssim,
)

BOX = (0.0, 10.0)


def _flat(values, shape=(1, 4, 4)) -> np.ndarray:
    """Constant images: the MSE between two of them is (u - v)^2."""
    return np.stack([np.full(shape, v, dtype=np.float64) for v in values])


# reconstructions at 2.9 and 1, true samples at 2, 5 (and a far 9): the costs are
# r0: (0.81, 4.41, 37.21), r1: (1, 16, 64). Greedy in order (r0 takes its nearest, 2) and
# greedy by smallest cost ((r0, 2) = 0.81 first) both leave r1 with 5: 0.81 + 16 = 16.81.
# The optimum crosses: r0 -> 5, r1 -> 2: 4.41 + 1 = 5.41.
REC = _flat([2.9, 1.0])
TRUE = _flat([2.0, 5.0, 9.0])


def test_match_is_optimal_where_greedy_is_not():
    matched = match(REC, TRUE, BOX)
    assert matched.tolist() == [1, 0]
    assert matched.dtype == np.int64
    # the greedy choice really is worse
    cost = ((REC[:, None] - TRUE[None]) ** 2).mean(axis=(2, 3, 4))
    first = int(np.argmin(cost[0]))
    second = int(np.argmin(np.where(np.arange(3) == first, np.inf, cost[1])))
    greedy = [first, second]
    assert greedy == [0, 1]
    assert cost[[0, 1], greedy].sum() > cost[[0, 1], matched].sum()


def test_match_three_channels_and_more_true_samples_than_reconstructions():
    rec = np.concatenate([REC, REC], axis=1)  # (2, 2, 4, 4)
    true = np.concatenate([TRUE, TRUE], axis=1)
    assert match(rec, true, BOX).tolist() == [1, 0]
    assert match(REC[:, 0], TRUE[:, 0], BOX).tolist() == [1, 0]  # (N, H, W)


def _brute_force(cost: np.ndarray) -> float:
    n, m = cost.shape
    return min(cost[np.arange(n), list(p)].sum() for p in itertools.permutations(range(m), n))


@pytest.mark.parametrize("cost_name", ["mse", "ssim"])
def test_match_against_brute_force(cost_name):
    rng = np.random.default_rng(5)
    for trial in range(15):
        n, m = int(rng.integers(1, 5)), int(rng.integers(4, 7))
        true = rng.uniform(0, 1, (m, 3, 11, 11))
        rec = np.clip(true[rng.permutation(m)[:n]] + rng.normal(0, 0.4, (n, 3, 11, 11)), 0, 1)
        matched = match(rec, true, 1.0, cost=cost_name)
        assert np.unique(matched).size == n
        if cost_name == "mse":
            cost = ((rec[:, None] - true[None]) ** 2).mean(axis=(2, 3, 4))
        else:
            cost = -np.array([[ssim(r[None], t[None], 1.0)[0] for t in true] for r in rec])
        assert cost[np.arange(n), matched].sum() == pytest.approx(_brute_force(cost), abs=1e-12)


def test_identifiability_is_the_nearest_true_sample_being_the_matched_one():
    matched = match(REC, TRUE, BOX)
    # r0 = 2.9 is matched to 5 but nearest to 2; r1 = 1 is matched to its nearest, 2
    assert identifiability(REC, TRUE, matched, BOX).tolist() == [False, True]
    assert identifiability(REC, TRUE, [0, 1], BOX).tolist() == [True, False]


def test_identifiability_counts_a_tie_with_a_duplicate_as_identified():
    true = _flat([2.0, 2.0, 7.0])
    rec = _flat([2.5, 6.0])
    assert identifiability(rec, true, [1, 2], BOX).tolist() == [True, True]
    assert identifiability(rec, true, [0, 2], BOX).tolist() == [True, True]


def test_the_distance_decides_which_sample_is_nearest():
    # r = t0 + 0.3 (brighter, same texture); t1 flat at 0.7. MSE: r is 0.09 from t0 but only
    # var(t0) ~ 0.013 from t1. SSIM: structure and contrast of r and t0 are equal (1), so
    # t0 wins; against a flat image the structure term is ~ C2 / (var + C2) ~ 0.06.
    rng = np.random.default_rng(6)
    t0 = rng.uniform(0.2, 0.6, (1, 1, 11, 11))
    true = np.concatenate([t0, np.full_like(t0, 0.7)])
    rec = t0 + 0.3
    assert match(rec, true, 1.0).tolist() == [1]
    assert match(rec, true, 1.0, cost="ssim").tolist() == [0]
    assert identifiability(rec, true, [0], 1.0).tolist() == [False]
    assert identifiability(rec, true, [0], 1.0, distance="ssim").tolist() == [True]


def test_prior_leakage_by_hand():
    # flat true images q and a flat prior p: SSIM(p, t) = (2 p q + C1) / (p^2 + q^2 + C1);
    # a perfect reconstruction has SSIM 1: leakage = (1 - s) / s
    c1 = 0.01**2
    q = np.array([0.2, 0.8])
    p = 0.5
    true = np.stack([np.full((1, 11, 11), v) for v in q])
    s = (2 * p * q + c1) / (p * p + q * q + c1)
    got = prior_leakage(true, true, np.full((1, 11, 11), p), 1.0)
    assert np.all(np.abs(got - (1 - s) / s) <= 1e-12)


def test_prior_leakage_is_nvflares_relative_ssim_gain():
    rng = np.random.default_rng(7)
    true = rng.uniform(0, 1, (4, 3, 12, 12))
    rec = np.clip(true + rng.normal(0, 0.3, true.shape), 0, 1)
    rec[3] = rng.uniform(0, 1, (3, 12, 12))   # a failed reconstruction
    prior = true.mean(axis=0)
    s_rec = ssim(rec, true, 1.0)
    s_pri = ssim(np.broadcast_to(prior, true.shape), true, 1.0)
    assert np.all(s_pri > 0)
    got = prior_leakage(rec, true, prior, 1.0)
    assert np.array_equal(got, (s_rec - s_pri) / s_pri)
    assert got[0] > 0 > got[3]


def test_prior_leakage_is_nan_where_the_priors_ssim_is_not_positive():
    # on [-1, 1], a flat -1 prior against a flat +1 sample: SSIM = (-2 + C1) / (2 + C1) < 0
    true = np.stack([np.full((11, 11), 1.0), np.full((11, 11), -0.5)])
    got = prior_leakage(true, true, np.full((11, 11), -1.0), (-1.0, 1.0))
    assert np.isnan(got[0]) and got[1] > 0


def _case():
    rng = np.random.default_rng(8)
    true = rng.uniform(0, 1, (5, 3, 12, 12))
    order = np.array([3, 0, 4])
    rec = np.clip(true[order] + rng.normal(0, 0.1, (3, 3, 12, 12)), 0, 1)
    true_labels = np.array([0, 1, 2, 1, 5])
    rec_labels = np.array([1, 0, 2])  # right, right, wrong (4 has 5)
    return rec, rec_labels, true, true_labels, true.mean(axis=0)


def test_reconstruction_metrics_holds_each_metric_of_the_matched_pairs():
    rec, rec_labels, true, true_labels, prior = _case()
    m = reconstruction_metrics(rec, rec_labels, true, true_labels, prior, 1.0)
    assert m.matched.tolist() == [3, 0, 4]
    assert np.array_equal(m.psnr, psnr(rec, true[m.matched], 1.0))
    assert np.array_equal(m.ssim, ssim(rec, true[m.matched], 1.0))
    assert np.array_equal(m.leakage, prior_leakage(rec, true[m.matched], prior, 1.0))
    assert np.array_equal(m.prior_ssim, ssim(np.broadcast_to(prior, rec.shape),
                                             true[m.matched], 1.0))
    assert m.identifiable.tolist() == [True, True, True]
    assert m.label_correct.tolist() == [True, True, False]
    with pytest.raises(ValueError):
        m.psnr[0] = 0.0  # read-only
    pooled = m.pooled()
    assert pooled.n == 3 and pooled.n_leakage == 3 and pooled.exact == 0
    assert pooled.psnr == float(np.mean(m.psnr)) and pooled.ssim == float(np.mean(m.ssim))
    assert pooled.psnr_median == float(np.median(m.psnr))
    assert pooled.identifiability == 1.0 and pooled.label_accuracy == 2 / 3
    assert pooled.leakage == float(np.mean(m.leakage))
    assert pooled.prior_ssim == float(np.mean(m.prior_ssim))


def test_reconstruction_metrics_options_reach_the_matching_and_the_window():
    rec, rec_labels, true, true_labels, prior = _case()
    small = reconstruction_metrics(rec[:, 0, :8, :8], rec_labels, true[:, 0, :8, :8],
                                   true_labels, prior[0, :8, :8], 1.0, cost="ssim",
                                   distance="ssim", win_size=7)
    assert small.matched.tolist() == [3, 0, 4]
    assert np.array_equal(small.ssim, ssim(rec[:, 0, :8, :8], true[[3, 0, 4], 0, :8, :8], 1.0,
                                           win_size=7))
    with pytest.raises(ValueError, match=r"images are 8x8, smaller than SSIM's 11x11"):
        reconstruction_metrics(rec[:, 0, :8, :8], rec_labels, true[:, 0, :8, :8],
                               true_labels, prior[0, :8, :8], 1.0)


def test_pooled_with_an_exact_copy_and_an_undefined_leakage():
    m = ReconstructionMetrics(
        matched=np.array([0, 1]), psnr=np.array([np.inf, 20.0]), ssim=np.array([1.0, 0.5]),
        prior_ssim=np.array([0.5, -0.1]), leakage=np.array([1.0, np.nan]),
        identifiable=np.array([True, False]), label_correct=np.array([True, True]))
    p = m.pooled()
    # the exact copy counted apart, the mean PSNR over the other; in the median it is
    # EXACT_PSNR_CAP = 300 dB: median(300, 20) = 160
    assert p.psnr == 20.0 and p.exact == 1 and p.psnr_median == 160.0
    assert p.leakage == 1.0 and p.n_leakage == 1
    assert p.identifiability == 0.5 and p.label_accuracy == 1.0
    assert p.ssim_gain == ((1.0 - 0.5) + (0.5 + 0.1)) / 2
    with pytest.raises(ValueError, match="1-D arrays of one length"):
        ReconstructionMetrics(matched=np.array([0]), psnr=np.array([1.0, 2.0]),
                              ssim=np.array([1.0]), prior_ssim=np.array([1.0]),
                              leakage=np.array([0.0]), identifiable=np.array([True]),
                              label_correct=np.array([True]))


@pytest.mark.parametrize("cost", ["mse", "ssim"])
@pytest.mark.parametrize("distance", ["mse", "ssim"])
def test_reconstruction_metrics_cost_and_distance_are_separate(cost, distance):
    # the case where MSE and SSIM disagree on the nearest sample (see above)
    rng = np.random.default_rng(6)
    t0 = rng.uniform(0.2, 0.6, (1, 1, 11, 11))
    true = np.concatenate([t0, np.full_like(t0, 0.7)])
    rec = t0 + 0.3
    m = reconstruction_metrics(rec, [0], true, [0, 0], true.mean(axis=0), 1.0, cost=cost,
                               distance=distance)
    assert m.matched.tolist() == match(rec, true, 1.0, cost=cost).tolist()
    assert m.identifiable.tolist() == [cost == distance]
    assert np.array_equal(m.identifiable,
                          identifiability(rec, true, m.matched, 1.0, distance=distance))


def test_pool_metrics_concatenates_cases_and_reports_what_is_undefined():
    """The pooling the reconstruction and imprint stages report, on explicit arrays: two
    cases pooled as one list of five reconstructions, not as a mean of the two means."""
    from fedaudit.image_metrics import pool_metrics

    def case(psnr_, ssim_, prior, leak, ident, label):
        return ReconstructionMetrics(matched=np.arange(len(psnr_)), psnr=np.array(psnr_),
                                     ssim=np.array(ssim_), prior_ssim=np.array(prior),
                                     leakage=np.array(leak), identifiable=np.array(ident),
                                     label_correct=np.array(label))

    a = case([10.0, np.inf], [0.2, 1.0], [0.1, 0.5], [1.0, 1.0], [False, True], [True, True])
    b = case([20.0, 30.0, 40.0], [0.4, 0.6, 0.8], [0.0, 0.2, 0.2], [np.nan, 2.0, 3.0],
             [True, True, False], [False, True, True])
    p = pool_metrics([a, b])
    assert (p.n, p.exact, p.n_leakage) == (5, 1, 4)
    assert p.psnr == 25.0  # (10 + 20 + 30 + 40) / 4; not the mean of the cases' means
    assert p.psnr_median == 30.0  # of 10, 300, 20, 30, 40
    # spreads (ddof 1): of the inexact PSNRs, sqrt(500 / 3) (integers: exact up to the
    # last division); of the five SSIMs, sqrt(0.4 / 4), whose tenths are not exact in
    # float64: a few ulps (about 1e-16 relative each) through the mean and the squares
    assert math.isclose(p.psnr_sd, math.sqrt(500 / 3), rel_tol=1e-15)
    assert math.isclose(p.ssim_sd, math.sqrt(0.1), rel_tol=1e-14)
    assert p.ssim == np.mean([0.2, 1.0, 0.4, 0.6, 0.8]) and p.identifiability == 3 / 5
    assert p.label_accuracy == 4 / 5 and p.leakage == np.mean([1.0, 1.0, 2.0, 3.0])
    assert p.as_dict()["samples"] == 5 and p.as_dict()["leakage_samples"] == 4
    only_exact = pool_metrics([case([np.inf], [1.0], [0.5], [np.nan], [True], [True])])
    assert only_exact.psnr is None and only_exact.leakage is None
    assert only_exact.psnr_sd is None and only_exact.ssim_sd is None  # fewer than two
    # one reconstruction: no interval, so neither a leak nor its absence can be shown
    assert only_exact.ssim_gain_ci is None and only_exact.as_dict()["verdict"] == "inconclusive"
    assert pool_metrics([]).as_dict() == {"samples": 0}
    # the SSIM gain over the prior: gains 0.1, 0.5 (case a) and 0.4, 0.4, 0.6 (case b), each
    # case its own client by default: mean 0.4, cluster totals 0.6 and 1.4 over 2 and 3
    # images, Var = 2 ((0.6 - 0.8)^2 + (1.4 - 1.2)^2) / 5^2 = 0.0064, t on 1 df; tenths a
    # few ulps off in float64
    half = stats.t.ppf(0.975, 1) * math.sqrt(0.0064)
    lo, hi = p.ssim_gain_ci
    assert math.isclose(lo, 0.4 - half, rel_tol=1e-12) and math.isclose(hi, 0.4 + half,
                                                                         rel_tol=1e-12)
    # the pooled t = 0.4 / 0.08 = 5 on 1 df (p 0.063); client b's three images t = 7 on 2
    # df (p 0.0099), times 3 for Holm: 0.03; nothing leaks, nothing is shown safe
    d = p.as_dict()
    assert d["verdict"] == "inconclusive" and d["verdict_detail"]["tests"] == 3
    worst = d["verdict_detail"]["worst_client"]
    assert worst["scope"] == "client 1" and math.isclose(worst["p_above"],
                                                         stats.t.sf(7.0, 2), rel_tol=1e-9)
    flat = pool_metrics([case([10.0, 12.0], [0.3, 0.1], [0.2, 0.2], [1.0, 1.0],
                              [True, True], [True, True])])
    assert flat.as_dict()["verdict"] == "inconclusive"  # gains +-0.1 over two images
    # gains +-0.01 for 12 clients of 4 images: the pooled interval is the point 0, and each
    # client's, 0 +- t(3) 0.0115 / 2 = +-0.018, lies within delta = 0.05; with 2 images a
    # client's interval on 1 df (+-0.127) could not show it
    four = case([10.0] * 4, [0.21, 0.19, 0.21, 0.19], [0.2] * 4, [1.0] * 4, [True] * 4,
                [True] * 4)
    many = pool_metrics([four] * 12, clients=list(range(12)))
    assert many.as_dict()["verdict"] == "no leak beyond delta"
    two = case([10.0] * 2, [0.21, 0.19], [0.2] * 2, [1.0] * 2, [True] * 2, [True] * 2)
    assert pool_metrics([two] * 12, clients=list(range(12))).as_dict()["verdict"] == \
        "inconclusive"
