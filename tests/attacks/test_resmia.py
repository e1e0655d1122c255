"""Res-MIA (attacks/membership/resmia.py): the erosion against explicit block means, adaptive
pooling and nearest upsampling, and the scores, their queries and curves on a stub model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from attacks import Oracle
from attacks.membership.resmia import default_sizes, erode, resmia_scores


class SharpnessModel(nn.Module):
    """Two classes; logit_0 = 10 * (pixel std of the image), logit_1 = 0.

    Confidence in class 0 falls as the image is blurred, so sharper images should get a
    higher Res-MIA score and constant images a score of exactly 0.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.flatten(1).std(dim=1, unbiased=False)
        return torch.stack([10 * s, torch.zeros_like(s)], dim=1)


def _block_mean(a: np.ndarray, block: int) -> np.ndarray:
    """Mean over non-overlapping block x block tiles of a 2-D array."""
    h, w = a.shape
    return a.reshape(h // block, block, w // block, block).mean(axis=(1, 3))


def _adaptive_mean(a: np.ndarray, out: int) -> np.ndarray:
    """Adaptive average pooling of a square 2-D array, windows [floor(iH/s), ceil((i+1)H/s))."""
    n = a.shape[0]
    bounds = [(math.floor(i * n / out), math.ceil((i + 1) * n / out)) for i in range(out)]
    return np.array([[a[r0:r1, c0:c1].mean() for (c0, c1) in bounds] for (r0, r1) in bounds])


def _nearest_up(a: np.ndarray, n: int) -> np.ndarray:
    """PyTorch 'nearest' upsampling of a square array to n x n: source index floor(i*s/n)."""
    src = [math.floor(i * a.shape[0] / n) for i in range(n)]
    return a[np.ix_(src, src)]


# --------------------------------------------------------------------------- erosion


def test_erode_matches_explicit_block_means_8x8():
    img = (np.arange(64, dtype=np.float64) ** 1.5 % 17).reshape(8, 8)  # irregular values
    x = torch.from_numpy(img).reshape(1, 1, 8, 8)
    levels = erode(x)
    assert len(levels) == 4  # x_0 .. x_3, K = log2(8)
    assert levels[0] is x
    for level, block in zip(levels[1:], (2, 4, 8)):
        expected = np.kron(_block_mean(img, block), np.ones((block, block)))
        assert level.shape == x.shape
        np.testing.assert_allclose(level[0, 0].numpy(), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(levels[3].numpy(), np.full((1, 1, 8, 8), img.mean()), atol=1e-12)


def test_erode_is_progressive_and_ends_at_channel_means():
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    levels = erode(x)
    for a, b in zip(levels, levels[1:]):
        assert not torch.allclose(a, b)  # no fixed-factor idempotence
    last = levels[-1]
    torch.testing.assert_close(last, x.mean(dim=(2, 3), keepdim=True).expand_as(x))


def test_fixed_factor_pooling_is_idempotent_which_is_why_sizes_shrink():
    x = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    x1 = erode(x, sizes=[4])[1]
    again = erode(x1, sizes=[4])[1]  # the same factor re-applied to x_1
    torch.testing.assert_close(again, x1)
    assert not torch.allclose(erode(x)[2], x1)


def test_erode_pools_from_x0_not_from_previous_step():
    img = np.random.default_rng(3).random((7, 7))
    x = torch.from_numpy(img).reshape(1, 1, 7, 7)
    x0, x1, x2 = erode(x, sizes=[4, 2])
    from_x0 = _nearest_up(_adaptive_mean(img, 2), 7)
    from_x1 = _nearest_up(_adaptive_mean(x1[0, 0].numpy(), 2), 7)
    np.testing.assert_allclose(x1[0, 0].numpy(), _nearest_up(_adaptive_mean(img, 4), 7), atol=1e-12)
    np.testing.assert_allclose(x2[0, 0].numpy(), from_x0, atol=1e-12)
    assert not np.allclose(from_x0, from_x1)  # the two readings really differ here


def test_default_sizes():
    assert default_sizes(8, 8) == [(4, 4), (2, 2), (1, 1)]
    assert default_sizes(32, 32) == [(16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]
    assert default_sizes(7, 7) == [(4, 4), (2, 2)]
    assert default_sizes(28, 28, steps=2) == [(14, 14), (7, 7)]
    # non-square: each side on its own, K from the longer side
    assert default_sizes(8, 32) == [(4, 16), (2, 8), (1, 4), (1, 2), (1, 1)]


@pytest.mark.parametrize(
    ("shape", "kwargs", "n_levels"),
    [
        ((2, 1, 7, 7), {}, 3),
        ((1, 3, 32, 32), {"sizes": [10, 5, 3]}, 4),
        ((1, 3, 32, 32), {"sizes": [(12, 9), (5, 5), 1]}, 4),
        ((2, 2, 8, 32), {}, 6),
        ((1, 1, 28, 28), {"steps": 2, "upsample": "bilinear"}, 3),
    ],
)
def test_erode_keeps_shape(shape, kwargs, n_levels):
    x = torch.rand(*shape, generator=torch.Generator().manual_seed(2))
    levels = erode(x, **kwargs)
    assert len(levels) == n_levels
    assert all(level.shape == x.shape and level.dtype == x.dtype for level in levels)


def test_bilinear_differs_from_nearest_except_at_1x1():
    x = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    near, bil = erode(x, upsample="nearest"), erode(x, upsample="bilinear")
    assert not torch.allclose(near[1], bil[1])
    assert not torch.allclose(near[2], bil[2])
    # a 1x1 image upsamples to the same constant image either way
    torch.testing.assert_close(near[3], bil[3])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sizes": [4, 4]}, "strictly decreasing"),
        ({"sizes": [2, 4]}, "strictly decreasing"),
        ({"sizes": [(4, 2), (2, 4)]}, "strictly decreasing"),
        ({"sizes": [8]}, "smaller than the 8x8 input"),
        ({"sizes": [9]}, "smaller than the 8x8 input"),
        ({"sizes": [0]}, "positive"),
        ({"sizes": [2.5]}, "integer"),
        ({"sizes": [True]}, "integer"),
        ({"sizes": []}, "non-empty"),
        ({"sizes": [4], "steps": 1}, "either steps or sizes"),
        ({"steps": 0}, r"steps must be an integer in \[1, 3\]"),
        ({"steps": 4}, r"steps must be an integer in \[1, 3\]"),
        ({"upsample": "bicubic"}, "upsample must be one of"),
    ],
)
def test_erode_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        erode(torch.zeros(1, 1, 8, 8), **kwargs)


def test_erode_rejects_bad_inputs():
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        erode(torch.zeros(8, 8))
    with pytest.raises(ValueError, match="floating-point"):
        erode(torch.zeros(1, 1, 8, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="too small"):
        erode(torch.zeros(1, 1, 1, 1))


# --------------------------------------------------------------------------- Res-MIA scores


def test_resmia_scores_queries_curves_and_formulas():
    x = torch.rand(5, 1, 8, 8, generator=torch.Generator().manual_seed(5))
    x[4] = 0.5  # a constant image: erosion changes nothing
    oracle = Oracle(SharpnessModel(), num_classes=2)
    scores, curves = resmia_scores(oracle, x, return_curves=True)
    assert oracle.queries == 5 * 4  # K + 1 = 4 queries per sample
    assert scores.shape == (5,) and curves.shape == (5, 4)
    assert scores.dtype == np.float64

    proba0 = Oracle(SharpnessModel()).predict_proba(x)
    np.testing.assert_allclose(curves[:, 0], proba0.max(axis=1))  # f_{y*}(x_0)
    for i, level in enumerate(erode(x)):
        p = Oracle(SharpnessModel()).predict_proba(level)
        np.testing.assert_allclose(curves[:, i], p[np.arange(5), proba0.argmax(axis=1)])

    np.testing.assert_allclose(scores, (curves[:, 0] - curves[:, 3]) / 3)
    slope = resmia_scores(oracle, x, score="mean-slope")
    by_hand = [sum((c[0] - c[k]) / k for k in (1, 2, 3)) / 3 for c in curves]
    np.testing.assert_allclose(slope, by_hand)

    assert np.all(scores[:4] > 0)  # sharp images lose confidence...
    assert scores[4] == 0.0  # ...a constant one does not


def test_resmia_sharper_image_scores_higher():
    gen = torch.Generator().manual_seed(6)
    sharp = torch.rand(1, 1, 8, 8, generator=gen)
    smooth = erode(sharp, sizes=[4])[1]  # same image with its finest detail removed
    oracle = Oracle(SharpnessModel())
    s = resmia_scores(oracle, torch.cat([sharp, smooth]))
    assert s[0] > s[1]


def test_resmia_chunking_and_input_types_do_not_change_scores():
    x = torch.rand(11, 1, 8, 8, generator=torch.Generator().manual_seed(7))
    model = SharpnessModel()
    ref = resmia_scores(Oracle(model), x)
    oracle = Oracle(model, batch_size=5)
    np.testing.assert_allclose(resmia_scores(oracle, x, chunk_size=1), ref)
    np.testing.assert_allclose(resmia_scores(oracle, x.numpy()), ref)
    assert oracle.queries == 2 * 11 * 4
    np.testing.assert_allclose(
        resmia_scores(Oracle(model), x, steps=2, upsample="bilinear"),
        resmia_scores(Oracle(model), x, sizes=[4, 2], upsample="bilinear"),
    )


def test_resmia_scores_validation():
    oracle = Oracle(SharpnessModel())
    x = torch.zeros(2, 1, 8, 8)
    with pytest.raises(ValueError, match="score must be one of"):
        resmia_scores(oracle, x, score="slope")
    with pytest.raises(ValueError, match="upsample must be one of"):
        resmia_scores(oracle, x, upsample="area")
    with pytest.raises(ValueError, match="chunk_size"):
        resmia_scores(oracle, x, chunk_size=0)
    assert oracle.queries == 0
