"""The PTQ quantizers on a tensor (fedaudit/quant/quantizers.py, docs/algorithms.md section
2): uniform symmetric grids and their error bound, ternary, binary and sparse ternary
rules, zero channels, dtypes, input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedaudit.quant import quantize_tensor

from tests.quant.weights import ALL_NAMES, INT_BITS, level_count, random_weights


@pytest.mark.parametrize("name", list(INT_BITS))
def test_uniform_symmetric_grid_and_error_bound(name):
    qmax = 2 ** (INT_BITS[name] - 1) - 1
    w = random_weights()
    q = quantize_tensor(w, name)
    scale = w.abs().amax(dim=1, keepdim=True).double() / qmax
    codes = q.double() / scale
    # dequantized values are integer codes in [-qmax, qmax] times the channel scale
    assert torch.allclose(codes, codes.round(), atol=1e-4)
    assert codes.round().abs().max() <= qmax
    for row in q:
        assert level_count(row) <= 2 * qmax + 1
    # round to nearest: |W - Q(W)| <= scale/2 (+ float32 rounding of the stored value)
    err = (w.double() - q.double()).abs()
    assert (err <= scale / 2 + 1e-6 * w.abs().double()).all()
    # the largest magnitude of each channel is represented exactly (it defines the scale)
    idx = w.abs().argmax(dim=1, keepdim=True)
    assert torch.allclose(q.gather(1, idx), w.gather(1, idx), rtol=1e-6)


def test_int8_uses_many_levels_int2_three():
    # uniform weights fill the grid: (nearly) all 255 int8 levels, exactly 3 for int2
    w = torch.rand(4, 5000, generator=torch.Generator().manual_seed(0)) * 2 - 1
    assert all(level_count(row) > 250 for row in quantize_tensor(w, "int8"))
    assert all(level_count(row) == 3 for row in quantize_tensor(w, "int2"))


def test_ternary_scale_is_mean_abs_and_round_rule():
    w = random_weights()
    q = quantize_tensor(w, "ternary")
    s = w.abs().double().mean(dim=1, keepdim=True)
    for row_q, row_w, s_c in zip(q.double(), w.double(), s):
        assert level_count(row_q) <= 3
        nonzero = row_q != 0
        assert torch.allclose(row_q[nonzero].abs(), s_c.expand(int(nonzero.sum())), rtol=1e-6)
        # round(W/s) clipped to [-1, 1]: zero iff |W| < s/2, sign kept otherwise
        assert torch.equal(nonzero, row_w.abs() > s_c / 2)
        assert torch.equal(torch.sign(row_q[nonzero]), torch.sign(row_w[nonzero]))


def test_binary_two_levels_and_sign_of_zero():
    w = random_weights()
    q = quantize_tensor(w, "binary")
    s = w.abs().double().mean(dim=1, keepdim=True)
    expected = torch.where(w >= 0, 1.0, -1.0).double() * s
    assert torch.allclose(q.double(), expected, rtol=1e-6)
    assert all(level_count(row) == 2 for row in q)
    z = torch.tensor([[0.0, 2.0, -4.0]])
    assert torch.equal(quantize_tensor(z, "binary"), torch.tensor([[2.0, 2.0, -2.0]]))


@pytest.mark.parametrize("name,pct", [("ternary-sparse50", 50), ("ternary-sparse90", 90)])
def test_sparse_ternary_fraction_and_kept_scale(name, pct):
    w = random_weights(16, 1000)
    n = w.shape[1]
    k = pct * n // 100
    q = quantize_tensor(w, name).double()
    order = torch.argsort(w.abs(), dim=1, stable=True)
    for row_q, row_w, row_order in zip(q, w.double(), order):
        assert level_count(row_q) <= 3
        pruned, kept = row_order[:k], row_order[k:]
        assert (row_q[pruned] == 0).all()
        s = row_w[kept].abs().mean()  # scale over the kept entries only
        nz = row_q != 0
        assert torch.allclose(row_q[nz].abs(), s.expand(int(nz.sum())), rtol=1e-6)
        # kept entries below s/2 round to 0 and stay 0; the others are +-s
        assert torch.equal(nz[kept], row_w[kept].abs() > s / 2)
        zero_frac = float((row_q == 0).double().mean())
        # realised sparsity: the nominal one plus the few kept entries rounded to zero
        assert pct / 100 <= zero_frac <= pct / 100 + 0.03


def test_sparse_tie_rule_prunes_earlier_positions_first():
    w = torch.tensor([[1.0, -1.0, 1.0, -1.0], [3.0, 1.0, 1.0, 2.0]])
    q = quantize_tensor(w, "ternary-sparse50")
    # row 0: all |W| tie -> the first two positions are pruned; kept mean |W| = 1
    # row 1: 1.0 at positions 1 and 2 pruned; kept {3, 2}: s = 2.5, round(3/2.5) = 1,
    # round(2/2.5) = 1
    assert torch.equal(q, torch.tensor([[0.0, 0.0, 1.0, -1.0], [2.5, 0.0, 0.0, 2.5]]))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_all_zero_channel_stays_zero(name):
    w = random_weights(3, 10)
    w[1] = 0.0
    q = quantize_tensor(w, name)
    assert torch.isfinite(q).all()
    assert (q[1] == 0).all()
    assert not torch.signbit(q[1]).any()


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_dtype_kept(name, dtype):
    w = random_weights(4, 32, dtype=dtype)
    q = quantize_tensor(w, name)
    assert q.dtype == dtype and q.shape == w.shape


def test_quantize_tensor_validation():
    with pytest.raises(ValueError, match="ndim >= 2"):
        quantize_tensor(torch.ones(5), "int8")
    with pytest.raises(ValueError, match="floating point"):
        quantize_tensor(torch.ones(2, 2, dtype=torch.int64), "int8")
    with pytest.raises(TypeError, match="torch.Tensor"):
        quantize_tensor(np.ones((2, 2)), "int8")
