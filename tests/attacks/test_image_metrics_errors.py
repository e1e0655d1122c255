"""fedaudit.image_metrics refuses bad input with one line naming the argument and what is
allowed; images clamped to the box in their own precision are inside it."""

from __future__ import annotations

import numpy as np
import pytest

from fedaudit.image_metrics import (
    identifiability,
    match,
    prior_leakage,
    psnr,
    reconstruction_metrics,
    ssim,
)

IMG = np.full((2, 3, 11, 11), 0.5)


def _with(value, index=(1, 2, 3, 4)):
    a = IMG.copy()
    a[index] = value
    return a


@pytest.mark.parametrize("fn", [psnr, ssim])
@pytest.mark.parametrize("a,b,message", [
    (IMG[0, 0, 0], IMG[0, 0, 0], r"a must be a batch of images \(N, C, H, W\) or \(N, H, W\), "
                                 r"got an array of shape \(11,\)"),
    (IMG[:0], IMG[:0], r"a must hold at least one non-empty image, got shape \(0, 3, 11, 11\)"),
    (IMG.astype(complex), IMG, r"a must hold real numbers, got dtype complex128"),
    (IMG.astype(bool), IMG, r"a must hold real numbers, got dtype bool"),
    (IMG, _with(np.nan), r"b must be finite; 1 value\(s\) are NaN or infinite "
                         r"\(first at index \(1, 2, 3, 4\): nan\)"),
    (_with(1.5), IMG, r"a must lie in data_range \[0.0, 1.0\]; 1 value\(s\) outside "
                      r"\(first at index \(1, 2, 3, 4\): 1.5\)"),
    (IMG, IMG[:1], r"a and b must hold the same number of images, got 2 and 1"),
    (IMG, IMG[:, :2], r"a and b must hold images of the same shape, got \(2, 3, 11, 11\) "
                      r"and \(2, 2, 11, 11\)"),
    (IMG[:, 0], IMG[:, :1], r"a and b must hold images of the same shape"),
])
def test_image_errors(fn, a, b, message):
    with pytest.raises(ValueError, match=message):
        fn(a, b, 1.0)


@pytest.mark.parametrize("data_range", [0, -1.0, (1.0, 0.0), (0.0, np.inf), np.nan, "1",
                                        True, (0.0,), (0.0, 1.0, 2.0), None])
def test_data_range_errors(data_range):
    with pytest.raises(ValueError, match=r"data_range must be a positive number L \(values in "
                                         r"\[0, L\]\) or an interval \(lo, hi\) with lo < hi"):
        psnr(IMG, IMG, data_range)


@pytest.mark.parametrize("win_size,message", [
    (4, "win_size must be an odd integer from 3 to 11, got 4"),
    (1, "win_size must be an odd integer from 3 to 11, got 1"),
    (13, "win_size must be an odd integer from 3 to 11, got 13"),
    (True, "win_size must be an odd integer from 3 to 11, got True"),
    (7.0, r"win_size must be an odd integer from 3 to 11, got 7.0"),
])
def test_window_errors(win_size, message):
    with pytest.raises(ValueError, match=message):
        ssim(IMG, IMG, 1.0, win_size=win_size)


def test_small_images_need_an_explicit_window():
    small = np.zeros((1, 8, 9))
    with pytest.raises(ValueError, match=r"images are 8x9, smaller than SSIM's 11x11 Gaussian "
                                         r"window \(Wang et al. 2004\); pass win_size, an odd "
                                         r"number from 3 to 7"):
        ssim(small, small, 1.0)
    with pytest.raises(ValueError, match=r"win_size=9 exceeds the images' 8x9"):
        ssim(small, small, 1.0, win_size=9)
    assert ssim(small, small, 1.0, win_size=7).tolist() == [1.0]
    tiny = np.zeros((1, 2, 5))
    with pytest.raises(ValueError, match=r"images are 2x5.*SSIM needs images of at least 3x3"):
        ssim(tiny, tiny, 1.0)
    assert psnr(tiny, tiny + 0.5, 1.0)[0] > 0  # PSNR has no window


def test_the_box_is_checked_in_the_arrays_precision():
    lo = 0.7  # float32(0.7) < 0.7: an image clamped to the box in float32 holds it
    assert float(np.float32(lo)) < lo
    a = np.full((1, 3, 3), np.float32(lo), dtype=np.float32)
    assert psnr(a, a, (lo, 2.0))[0] == np.inf
    with pytest.raises(ValueError, match=r"a must lie in data_range \[0.7, 2.0\]"):
        psnr(a.astype(np.float64), a, (lo, 2.0))


def test_matching_errors():
    rec, true = IMG, np.concatenate([IMG, IMG])
    with pytest.raises(ValueError, match=r"cannot match 4 reconstructions one to one to 2 "
                                         r"true samples"):
        match(true, rec, 1.0)
    with pytest.raises(ValueError, match=r"cost must be one of \['mse', 'ssim'\], got 'l1'"):
        match(rec, true, 1.0, cost="l1")
    with pytest.raises(ValueError, match=r"reconstructed and true must hold images of the same "
                                         r"shape"):
        match(rec, true[:, :1], 1.0)
    with pytest.raises(ValueError, match=r"distance must be one of \['mse', 'ssim'\]"):
        identifiability(rec, true, [0, 1], 1.0, distance="lpips")
    for matched, message in [
        ([0], r"matched must hold one integer index per reconstruction, shape \(2,\), got "
              r"dtype int64 and shape \(1,\)"),
        ([0.0, 1.0], r"matched must hold one integer index .* got dtype float64"),
        ([0, 4], r"matched must index the 4 true samples \(0 to 3\); matched\[1\] = 4"),
        ([-1, 0], r"matched\[0\] = -1"),
        ([2, 2], r"matched must be a one-to-one assignment \(distinct indices\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            identifiability(rec, true, matched, 1.0)


def test_leakage_and_record_errors():
    with pytest.raises(ValueError, match=r"prior must be one image of the samples' shape "
                                         r"\(3, 11, 11\), got shape \(1, 3, 11, 11\)"):
        prior_leakage(IMG, IMG, IMG[:1], 1.0)
    with pytest.raises(ValueError, match=r"prior must lie in data_range \[0.0, 1.0\]; 1 value"
                                         r"\(s\) outside \(first at index \(2, 3, 4\): -0.25\)"):
        prior_leakage(IMG, IMG, _with(-0.25)[1], 1.0)
    with pytest.raises(ValueError, match=r"true_matched must hold images of the same shape"):
        prior_leakage(IMG, IMG[:, :1], IMG[0], 1.0)
    good = dict(reconstructed=IMG, rec_labels=[0, 1], true_images=IMG, true_labels=[1, 0],
                prior=IMG[0], data_range=1.0)
    for key, value, message in [
        ("rec_labels", [0], r"rec_labels must hold one integer label per image, shape \(2,\), "
                            r"got dtype int64 and shape \(1,\)"),
        ("true_labels", [0.0, 1.0], r"true_labels must hold one integer label per image, "
                                    r"shape \(2,\), got dtype float64"),
        ("prior", IMG[0, 0], r"prior must be one image of the samples' shape"),
        ("true_images", _with(np.inf), r"true_images must be finite"),
    ]:
        with pytest.raises(ValueError, match=message):
            reconstruction_metrics(**{**good, key: value})
    with pytest.raises(ValueError, match=r"win_size must be an odd integer"):
        reconstruction_metrics(**good, win_size=2)
