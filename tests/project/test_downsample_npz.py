"""experiments/downsample_npz.py: block means against an explicit loop, and sizes that do
not divide refused."""

import importlib.util

import numpy as np
import pytest

from tests.helpers.paths import ROOT

spec = importlib.util.spec_from_file_location("downsample_npz",
                                              ROOT / "experiments" / "downsample_npz.py")
shrink = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shrink)


@pytest.mark.parametrize("shape", [(3, 2, 8, 8), (3, 8, 8)])
def test_block_means_rounded_to_uint8(shape):
    x = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    got = shrink.downsample(x, 2)
    assert got.dtype == np.uint8 and got.shape == (*shape[:-2], 2, 2)
    for idx in np.ndindex(*shape[:-2]):
        for i in range(2):
            for j in range(2):
                block = x[idx][4 * i:4 * i + 4, 4 * j:4 * j + 4].astype(np.float64)
                assert got[idx][i, j] == np.rint(block.mean())


def test_a_side_that_does_not_divide_is_refused():
    with pytest.raises(SystemExit, match="not a multiple of 3"):
        shrink.downsample(np.zeros((1, 8, 8), np.uint8), 3)
