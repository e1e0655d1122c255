"""fedaudit.image_metrics' SSIM (scikit-image) against an independent implementation of
Wang et al. 2004 written from the paper, and against values derived by hand; PSNR by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedaudit.image_metrics import psnr, ssim

EPS = np.finfo(np.float64).eps


def _window(win: int) -> np.ndarray:
    """The paper's weighting function: a Gaussian over win x win pixels, normalised to sum 1
    (Wang et al. section III.C: 11x11, sigma 1.5; smaller windows keep radius/sigma)."""
    r = (win - 1) // 2
    sigma = 1.5 * (win - 1) / 10
    g = np.exp(-np.arange(-r, r + 1) ** 2 / (2 * sigma**2))
    w = np.outer(g, g)
    return w / w.sum()


def wang_ssim(x: np.ndarray, y: np.ndarray, width: float, win: int = 11) -> float:
    """MSSIM of two (C, H, W) images, window by window, as the paper writes it: luminance
    (eq. 6), contrast (eq. 9), structure (eq. 10) with C3 = C2 / 2, their product (eq. 12,
    alpha = beta = gamma = 1, equal to eq. 13), weighted statistics (eqs. 14-16) over every
    position where the window fits, the mean over positions (eq. 17), then over channels.
    Centred (co)variances, unlike scikit-image's E[x^2] - E[x]^2."""
    w = _window(win)
    c1, c2 = (0.01 * width) ** 2, (0.03 * width) ** 2
    c3 = c2 / 2
    per_channel = []
    for xc, yc in zip(x, y):
        values = []
        for i in range(xc.shape[0] - win + 1):
            for j in range(xc.shape[1] - win + 1):
                px, py = xc[i:i + win, j:j + win], yc[i:i + win, j:j + win]
                mx, my = (w * px).sum(), (w * py).sum()
                sx = math.sqrt((w * (px - mx) ** 2).sum())
                sy = math.sqrt((w * (py - my) ** 2).sum())
                sxy = (w * (px - mx) * (py - my)).sum()
                lum = (2 * mx * my + c1) / (mx**2 + my**2 + c1)
                con = (2 * sx * sy + c2) / (sx**2 + sy**2 + c2)
                struct = (sxy + c3) / (sx * sy + c3)
                values.append(lum * con * struct)
        per_channel.append(np.mean(values))
    return float(np.mean(per_channel))


def _tolerance(box: tuple[float, float]) -> float:
    """First-order bound on scikit-image's rounding: it forms a variance as E[x^2] - E[x]^2,
    whose error is a few eps * max|x|^2 (the weights sum to 1); SSIM's variance terms sit
    over C2 + (co)variances >= C2 with the other factor at most 1 in size, so each moves SSIM
    by at most its error / C2. Six such errors (vx, vy, vxy in numerator and denominator),
    generously 16 eps M^2 / C2, M = max|x|. The reference's own error is smaller (centred)."""
    m = max(abs(box[0]), abs(box[1]))
    return 16 * EPS * m**2 / (0.03 * (box[1] - box[0])) ** 2


@pytest.mark.parametrize("win", [3, 5, 7, 9, 11])
@pytest.mark.parametrize("box", [(0.0, 1.0), (0.0, 255.0), (-1.0, 1.0)])
def test_ssim_equals_the_papers_formula(win, box):
    rng = np.random.default_rng(win)
    lo, hi = box
    n, shape = 3, (3, 14, 12)  # not square, more than one position per axis
    a = rng.uniform(lo, hi, (n, *shape))
    b = np.clip(a + rng.normal(0, 0.2 * (hi - lo), a.shape), lo, hi)
    yy, xx = np.mgrid[0:shape[1], 0:shape[2]]
    a[1] = lo + (hi - lo) * (0.5 + 0.4 * np.sin(xx / 2.0 + yy / 3.0 + np.arange(3)[:, None, None]))
    b[1] = np.roll(a[1], 1, axis=-1)  # a smooth image shifted by one pixel
    b[2] = lo + hi - a[2]  # an inverted copy: negative structure
    got = ssim(a, b, box, win_size=win)
    ref = np.array([wang_ssim(a[i], b[i], hi - lo, win) for i in range(n)])
    assert got.shape == (n,) and got.dtype == np.float64
    assert np.all(np.abs(got - ref) <= _tolerance(box)), (got, ref)
    assert 0 < ref[1] < 1
    # inverted: structure near -1; the luminance term is negative too when lo = -hi
    assert (ref[2] < 0) == (lo == 0)


def test_ssim_default_window_is_11_and_bounds_hold_where_cancellation_is_worst():
    # near-constant bright images: the variances are tiny against x^2, the worst case for
    # scikit-image's E[x^2] - E[x]^2; the bound must still hold
    rng = np.random.default_rng(1)
    a = 1.0 - rng.uniform(0, 1e-3, (2, 1, 13, 16))
    b = 1.0 - rng.uniform(0, 1e-3, (2, 1, 13, 16))
    got = ssim(a, b, 1.0)
    ref = [wang_ssim(a[i], b[i], 1.0, 11) for i in range(2)]
    assert np.all(np.abs(got - ref) <= _tolerance((0.0, 1.0)))
    assert np.all(ssim(a, b, 1.0) == ssim(a, b, 1.0, win_size=11))


def test_an_image_against_itself_is_exactly_one():
    rng = np.random.default_rng(2)
    a = rng.uniform(0, 1, (3, 2, 12, 12))
    assert np.all(ssim(a, a, 1.0) == 1.0)  # numerator and denominator are the same floats


@pytest.mark.parametrize("p,q,box", [(0.3, 0.3, (0.0, 1.0)), (0.2, 0.9, (0.0, 1.0)),
                                     (10.0, 200.0, (0.0, 255.0)), (-0.5, 0.5, (-1.0, 1.0)),
                                     (-1.0, 1.0, (-1.0, 1.0))])
def test_constant_images_by_hand(p, q, box):
    # every window: mu = p and q, no variance: SSIM = (2 p q + C1) / (p^2 + q^2 + C1)
    width = box[1] - box[0]
    c1 = (0.01 * width) ** 2
    expected = (2 * p * q + c1) / (p * p + q * q + c1)
    got = ssim(np.full((1, 3, 11, 12), p), np.full((1, 3, 11, 12), q), box)
    assert abs(got[0] - expected) <= _tolerance(box) + 4 * EPS
    if p * q < 0:
        assert got[0] < 0


def _weights_3x3():
    """The 3x3 window by hand: sigma = 1.5 * 2 / 10 = 0.3, 1-D weights (e, 1, e) / (1 + 2e)
    with e = exp(-1 / (2 * 0.09)); the centre weight is their square, an edge-middle one
    centre * e."""
    e = math.exp(-1 / 0.18)
    centre = 1 / (1 + 2 * e) ** 2
    return centre, centre * e


@pytest.mark.parametrize("v", [1.0, 0.4])
def test_one_window_impulse_against_black_by_hand(v):
    # x: v at the centre of a 3x3 image, y = 0: mu_x = v Wc, var_x = v^2 Wc (1 - Wc),
    # mu_y = var_y = cov = 0
    wc, _ = _weights_3x3()
    c1, c2 = 0.01**2, 0.03**2
    expected = c1 * c2 / ((v * v * wc * wc + c1) * (v * v * wc * (1 - wc) + c2))
    x = np.zeros((1, 3, 3))
    x[0, 1, 1] = v
    got = ssim(x, np.zeros((1, 3, 3)), 1.0, win_size=3)
    assert abs(got[0] - expected) <= _tolerance((0.0, 1.0))
    assert abs(wang_ssim(x, np.zeros((1, 3, 3)), 1.0, 3) - expected) <= 16 * EPS


def test_one_window_shifted_impulse_by_hand():
    # x: 1 at the centre, y: 1 one pixel to the right: mu_x = Wc, mu_y = We,
    # var = W (1 - W) each, cov = E[xy] - mu_x mu_y = -Wc We
    wc, we = _weights_3x3()
    c1, c2 = 0.01**2, 0.03**2
    expected = ((2 * wc * we + c1) * (c2 - 2 * wc * we)
                / ((wc * wc + we * we + c1) * (wc * (1 - wc) + we * (1 - we) + c2)))
    x, y = np.zeros((1, 3, 3)), np.zeros((1, 3, 3))
    x[0, 1, 1] = y[0, 1, 2] = 1.0
    got = ssim(x, y, 1.0, win_size=3)
    assert abs(got[0] - expected) <= _tolerance((0.0, 1.0))
    assert got[0] < 0  # the structure term: the two images anti-correlate in the window


def test_one_window_noised_constant_by_hand():
    # x constant p; y = p + d at the centre: mu_y = p + d Wc, var_y = d^2 Wc (1 - Wc), cov = 0
    wc, _ = _weights_3x3()
    c1, c2 = 0.01**2, 0.03**2
    p, d = 0.5, 0.25
    my = p + d * wc
    expected = ((2 * p * my + c1) * c2
                / ((p * p + my * my + c1) * (d * d * wc * (1 - wc) + c2)))
    x = np.full((2, 3, 3), p)
    y = x.copy()
    y[:, 1, 1] += d
    got = ssim(x, y, 1.0, win_size=3)  # (N, H, W): one channel
    assert np.all(np.abs(got - expected) <= _tolerance((0.0, 1.0)))


def test_channels_are_averaged_and_pairs_are_independent():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, (2, 3, 11, 11))
    b = rng.uniform(0, 1, (2, 3, 11, 11))
    per_channel = np.array([[ssim(a[i:i + 1, c], b[i:i + 1, c], 1.0)[0] for c in range(3)]
                            for i in range(2)])
    assert np.all(np.abs(ssim(a, b, 1.0) - per_channel.mean(axis=1)) <= 4 * EPS)
    assert ssim(a, b, 1.0)[1] == ssim(a[1:], b[1:], 1.0)[0]


def test_data_range_number_means_from_zero_and_sets_the_constants():
    rng = np.random.default_rng(4)
    a = rng.uniform(0, 0.5, (1, 1, 11, 11))
    b = rng.uniform(0, 0.5, (1, 1, 11, 11))
    assert ssim(a, b, 1.0)[0] == ssim(a, b, (0.0, 1.0))[0]
    assert ssim(a, b, 0.5)[0] != ssim(a, b, 1.0)[0]  # C1, C2 scale with the width
    assert abs(ssim(a, b, 0.5)[0] - wang_ssim(a[0], b[0], 0.5)) <= _tolerance((0.0, 0.5))


def test_psnr_by_hand():
    a = np.zeros((3, 1, 2, 2))
    b = a.copy()
    b[0, 0, 0, 0] = 0.5            # MSE = 0.25 / 4 = 1/16: 10 log10(16)
    b[1] = 1.0                     # MSE = 1: 0 dB
    got = psnr(a, b, 1.0)
    assert got[0] == 10 * math.log10(16.0)
    assert got[1] == 0.0
    assert got[2] == math.inf      # identical images
    assert np.all(psnr(a, b, (0.0, 1.0)) == got)


def test_psnr_range_and_channels():
    a = np.full((1, 3, 2, 2), -1.0)
    b = a.copy()
    b[0, 2] += 0.5                 # one channel of three off by 0.5: MSE = 0.25 / 3
    # L = 2: 10 log10(4 / (1/12)) = 10 log10(48)
    assert psnr(a, b, (-1.0, 1.0))[0] == 10 * math.log10(48.0)
    u = np.zeros((1, 4, 4), dtype=np.uint8)
    assert psnr(u, np.full((1, 4, 4), 255, dtype=np.uint8), 255)[0] == 0.0
    assert psnr(u, np.full((1, 4, 4), 51, dtype=np.uint8), 255)[0] == 10 * math.log10(25.0)
