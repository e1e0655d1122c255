"""The imprint block (Fowl et al. 2022) against explicit cases: samples alone in their
interval come back exactly from the block's gradient, from a weighted sum of clients'
gradients and from an SGD update; shared intervals and the lowest one give nothing exact;
the expected share against a simulation of its assumption."""

import numpy as np
import pytest
import torch
from torch import nn

from attacks.imprint import (ImprintBlock, expected_recovery_rate, gaussian_thresholds,
                             imprinted, recover_images)

SHAPE = (1, 4, 4)
D = 16


def _images(means, seed=0):
    """Images whose mean pixel is exactly each of ``means`` (a random zero-mean pattern
    plus the mean), float64."""
    g = np.random.default_rng(seed)
    pattern = g.normal(0, 0.05, size=(len(means), D))
    pattern -= pattern.mean(axis=1, keepdims=True)
    return torch.from_numpy((pattern + np.asarray(means)[:, None]).reshape(-1, *SHAPE))


def _model(c):
    torch.manual_seed(0)
    task = nn.Sequential(nn.Flatten(), nn.Linear(D, 8), nn.ReLU(), nn.Linear(8, 3))
    return imprinted(task, ImprintBlock(SHAPE, c)).double()


def _block_grads(model, x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    gw, gb = torch.autograd.grad(loss, [model[0].linear0.weight, model[0].linear0.bias])
    return gw.numpy(), gb.numpy()


C = gaussian_thresholds(0.5, 0.1, 20)
MID = (C[:-1] + C[1:]) / 2  # one point inside each interval (c_i, c_i+1]


def _matches(candidates, x):
    """For each true image, its distance to the nearest candidate (max abs)."""
    flat = candidates.reshape(len(candidates), -1)
    return np.array([np.abs(flat - xi.numpy().ravel()).max(axis=1).min() for xi in x])


def test_thresholds_split_the_gaussian_into_equal_intervals():
    from scipy.stats import norm

    mass = np.diff(norm.cdf(np.concatenate([[-np.inf], C, [np.inf]]), loc=0.5, scale=0.1))
    np.testing.assert_allclose(mass, 1 / 21, rtol=1e-12)
    with pytest.raises(ValueError, match="bins = 0"):
        gaussian_thresholds(0.5, 0.1, 0)
    with pytest.raises(ValueError, match="sigma > 0"):
        gaussian_thresholds(0.5, 0.0, 4)


@pytest.mark.parametrize("gain", [1.0, 1000.0])
def test_the_block_adds_the_same_term_to_every_pixel_whatever_the_gain(gain):
    block = ImprintBlock(SHAPE, C, gain).double()
    x = _images(MID[[0, 6, 12]])
    added = (block(x).detach() - x).reshape(3, -1).numpy()
    # sum_i relu(mean - c_i) / d on every pixel.  The block's weights are set in float32
    # (nn.Linear's dtype) before .double(): each carries float32's 6e-8 relative rounding,
    # and the pre-activations subtract nearly equal numbers (mean - c_i), hence 1e-6
    want = np.maximum(MID[[0, 6, 12]][:, None] - C[None, :], 0).sum(axis=1) / D
    np.testing.assert_allclose(added, np.repeat(want[:, None], D, axis=1), rtol=1e-6,
                               atol=1e-12)
    with pytest.raises(ValueError, match="strictly increasing"):
        ImprintBlock(SHAPE, C[::-1].copy())
    with pytest.raises(ValueError, match="gain = 0"):
        ImprintBlock(SHAPE, C, 0)


def test_samples_alone_in_their_interval_come_back_exactly():
    model = _model(C)
    x = _images(MID[[2, 5, 9, 14, 18]])
    y = torch.tensor([0, 1, 2, 0, 1])
    images, bins = recover_images(*_block_grads(model, x, y), SHAPE)
    assert len(images) == 5 and list(bins) == [2, 5, 9, 14, 18]
    # float64: the ratio of two differences of sums of ~5 terms, ~1e-15 relative each
    assert _matches(images, x).max() < 1e-10


def test_a_weighted_sum_of_clients_and_an_sgd_update_keep_them_exact():
    """Secure aggregation's weighted mean and a local SGD step scale the gradients: the
    ratios do not change."""
    model = _model(C)
    xa, xb = _images(MID[[1, 7]], seed=1), _images(MID[[12, 16]], seed=2)
    ga = _block_grads(model, xa, torch.tensor([0, 2]))
    gb = _block_grads(model, xb, torch.tensor([1, 1]))
    agg_w = -0.05 * (0.3 * ga[0] + 0.7 * gb[0])  # -lr * weighted mean
    agg_b = -0.05 * (0.3 * ga[1] + 0.7 * gb[1])
    images, _ = recover_images(agg_w, agg_b, SHAPE)
    assert _matches(images, torch.cat([xa, xb])).max() < 1e-10


def test_shared_and_lowest_intervals_give_nothing_exact():
    model = _model(C)
    below = C[0] - 0.1
    x = _images([MID[4], MID[4] + 1e-4, MID[10], below], seed=3)  # two share bin 4
    images, bins = recover_images(*_block_grads(model, x, torch.tensor([0, 1, 2, 0])), SHAPE)
    dist = _matches(images, x)
    assert dist[2] < 1e-10  # alone
    assert dist[0] > 1e-3 and dist[1] > 1e-3  # their bin gives a weighted mean of the two
    assert dist[3] > 1e-3  # below c_1: no bin active
    assert list(bins) == [4, 10]


def test_the_expected_share_matches_a_simulation_of_its_assumption():
    """Gaussian measurements, equal-mass intervals: the share of samples alone in one of
    the k upper intervals, over many simulated rounds, against (k/(k+1))^N."""
    g = np.random.default_rng(0)
    for n, k in ((8, 4), (64, 128), (20, 20)):
        c = gaussian_thresholds(0.0, 1.0, k)
        trials = 4000
        shares = []
        for _ in range(trials):
            idx = np.searchsorted(c, g.normal(size=n))  # 0 = below c_1
            counts = np.bincount(idx, minlength=k + 1)
            shares.append(np.sum((counts[idx] == 1) & (idx > 0)) / n)
        shares = np.asarray(shares)
        expected = expected_recovery_rate(n, k)
        # 5 standard errors of the mean of `trials` shares
        assert abs(shares.mean() - expected) < 5 * shares.std() / np.sqrt(trials), (n, k)
    assert expected_recovery_rate(1, 1) == 0.5
    with pytest.raises(ValueError, match="bins = 0"):
        expected_recovery_rate(3, 0)


@pytest.mark.parametrize("w, b, shape, message", [
    (np.zeros((3, 16)), np.zeros(2), SHAPE, r"bias_update \(k,\)"),
    (np.zeros((3, 15)), np.zeros(3), SHAPE, "15 columns"),
    (np.full((3, 16), np.nan), np.zeros(3), SHAPE, "non-finite"),
])
def test_bad_updates_are_refused(w, b, shape, message):
    with pytest.raises(ValueError, match=message):
        recover_images(w, b, shape)


def test_an_update_that_reached_no_bin_gives_no_candidate():
    images, bins = recover_images(np.zeros((4, 16)), np.zeros(4), SHAPE)
    assert images.shape == (0, *SHAPE) and len(bins) == 0


def test_the_block_for_reference_data_takes_the_gaussian_of_its_mean_pixel():
    """imprint_block_for: the biases are -c_i / gain for the thresholds of the reference
    samples' mean pixels, their mean and standard deviation computed here by hand in
    float64; too few samples are refused."""
    from scipy.stats import norm

    from attacks.imprint import imprint_block_for

    rng = np.random.default_rng(5)
    ref = rng.uniform(0, 1, size=(50, 3, 4, 4)).astype(np.float32)
    block = imprint_block_for(ref, bins=7, gain=10.0)
    m = [float(np.mean(ref[i].astype(np.float64))) for i in range(50)]
    mu, sd = float(np.mean(m)), float(np.sqrt(np.mean((np.array(m) - np.mean(m)) ** 2)))
    c = mu + sd * norm.ppf(np.arange(1, 8) / 8)
    # the biases are float32 parameters: compare at float32's resolution of |c / gain| < 0.1
    np.testing.assert_allclose(block.linear0.bias.detach().double().numpy(), -c / 10.0,
                               rtol=0, atol=1e-8)
    assert block.input_shape == (3, 4, 4) and block.bins == 7
    with pytest.raises(ValueError, match="at least 2 samples"):
        imprint_block_for(ref[:1], bins=7)


def test_strongest_candidates_keep_the_largest_bias_differences_in_bin_order():
    """Bias update (k = 5): |db_i - db_{i+1}| = 1, 4, 0.5, 3, 2 (db_6 = 0), so with n = 3 the
    bins 1, 3 and 4 stay, in that order; n >= the candidates keeps all."""
    from attacks.imprint import strongest_candidates

    db = np.array([10.5, 9.5, 5.5, 5.0, 2.0])
    np.testing.assert_allclose(np.abs(db - np.append(db[1:], 0.0)), [1, 4, 0.5, 3, 2.0])
    images = np.arange(5.0)[:, None] * np.ones((5, 2))
    bins = np.arange(5)
    kept, kept_bins = strongest_candidates(images, bins, db, 3)
    assert kept_bins.tolist() == [1, 3, 4] and kept[:, 0].tolist() == [1.0, 3.0, 4.0]
    # a subset of bins (candidates of the reached bins only): indexes into the full update
    sub, sub_bins = strongest_candidates(images[[0, 2, 3]], np.array([0, 2, 3]), db, 2)
    assert sub_bins.tolist() == [0, 3] and sub[:, 0].tolist() == [0.0, 3.0]
    same, same_bins = strongest_candidates(images, bins, db, 5)
    assert same is images and same_bins is bins
