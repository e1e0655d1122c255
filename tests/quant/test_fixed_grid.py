"""Quantizing on a fixed grid (reference=): without a reference bit-identical to each
tensor's own grid, with one the reference's scales and clamps, custom quantizers receive
it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from fedaudit.quant import (
    QUANTIZERS,
    is_quantized_tensor,
    quantize,
    quantize_tensor,
    quantizer_info,
    register_quantizer,
)

from tests.quant.weights import ALL_NAMES, INT_BITS, bytes_equal, random_weights, small_model

# r_Qn assumes a FIXED grid (Aubinais et al.): the candidates are the finite set of
# configurations reachable on it. With reference=R every tensor is rounded onto the
# per-channel grid computed from R (scales max|R_c| / qmax or mean|R_c|), so neighbouring
# checkpoints collapse; quantize_trajectory uses the last checkpoint as R by default.


def _legacy_quantize_tensor(w: torch.Tensor, name: str) -> torch.Tensor:
    """The quantizers as they were before `reference` existed (own grid), written out."""
    if name == "fp32":
        return w.clone()
    x = w.detach().to(torch.float64).reshape(w.shape[0], -1)

    def safe(s):
        return torch.where(s > 0, s, torch.ones_like(s))

    def rnd(v):
        return torch.round(v) + 0.0

    if name in INT_BITS:
        qmax = 2 ** (INT_BITS[name] - 1) - 1
        scale = x.abs().amax(dim=1, keepdim=True) / qmax
        out = torch.clamp(rnd(x / safe(scale)), -qmax, qmax) * scale
    elif name == "binary":
        out = torch.where(x >= 0, 1.0, -1.0).to(x.dtype) * x.abs().mean(dim=1, keepdim=True)
    else:
        keep = None
        if name == "ternary":
            scale = x.abs().mean(dim=1, keepdim=True)
        else:
            k = int(name.removeprefix("ternary-sparse")) * x.shape[1] // 100
            order = torch.argsort(x.abs(), dim=1, stable=True)
            keep = torch.ones_like(x, dtype=torch.bool)
            keep.scatter_(1, order[:, :k], False)
            scale = torch.where(keep, x.abs(), 0.0).sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True)
        q = torch.clamp(rnd(x / safe(scale)), -1, 1)
        if keep is not None:
            q = torch.where(keep, q, 0.0)
        out = q * scale
    return out.reshape(w.shape).to(dtype=w.dtype)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_no_reference_is_bit_identical_to_own_grid(name):
    sd = small_model().state_dict()
    expected = {k: _legacy_quantize_tensor(v, name) if is_quantized_tensor(k, v) else v for k, v in sd.items()}
    for out in (
        quantize(sd, name),
        quantize(sd, name, reference=None),
        quantize(sd, name, reference=sd),  # a model quantized on its own grid
        quantize(sd, name, reference=copy.deepcopy(sd)),
    ):
        assert list(out) == list(sd)
        for k in sd:
            assert bytes_equal(out[k], expected[k]), k
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        w = random_weights(16, 200, dtype=dtype)
        legacy = _legacy_quantize_tensor(w, name)
        assert bytes_equal(quantize_tensor(w, name), legacy)
        assert bytes_equal(quantize_tensor(w, name, reference=None), legacy)
        assert bytes_equal(quantize_tensor(w, name, reference=w.clone()), legacy)
        spec = quantizer_info(name)
        assert bytes_equal(spec(w), legacy) and bytes_equal(spec(w, reference=w.clone()), legacy)


def _candidate_and_reference() -> tuple[torch.Tensor, torch.Tensor]:
    # float64 so the checks can be tight; W is 1.5x larger than R channel by channel on
    # average, so some of its values lie beyond the reference's range and must clamp
    w = random_weights(16, 200, seed=1, dtype=torch.float64) * 1.5
    r = random_weights(16, 200, seed=2, dtype=torch.float64)
    return w, r


@pytest.mark.parametrize("name", list(INT_BITS))
def test_fixed_grid_int_uses_reference_scale_and_clamps(name):
    qmax = 2 ** (INT_BITS[name] - 1) - 1
    w, r = _candidate_and_reference()
    q = quantize_tensor(w, name, reference=r)
    r_max = r.abs().amax(dim=1, keepdim=True)
    scale = r_max / qmax
    codes = q / scale
    # every value is an integer multiple of the REFERENCE's step max|R_c| / qmax ...
    assert torch.allclose(codes, codes.round(), rtol=0, atol=1e-9)
    assert codes.round().abs().max() <= qmax
    # ... within the reference's range: values of W beyond +-max|R_c| clamp to it
    beyond = w.abs() > r_max
    assert beyond.any() and (~beyond).any()  # the construction exercises both cases
    assert (q.abs() <= r_max * (1 + 1e-12)).all()
    assert torch.allclose(q[beyond], (torch.sign(w) * r_max).expand_as(w)[beyond], rtol=1e-12, atol=0)
    # inside the range: round to nearest on the reference grid, |W - Q(W)| <= step / 2
    err = (w - q).abs()
    assert (err[~beyond] <= (scale / 2).expand_as(w)[~beyond] * (1 + 1e-9)).all()
    # and it is not the candidate's own grid
    assert not torch.equal(q, quantize_tensor(w, name))


def test_fixed_grid_binary_levels_are_reference_absmean():
    w, r = _candidate_and_reference()
    q = quantize_tensor(w, "binary", reference=r)
    s = r.abs().mean(dim=1, keepdim=True)
    for row_q, row_w, s_c in zip(q, w, s):
        levels = torch.unique(row_q)
        assert levels.numel() == 2
        assert torch.allclose(levels, torch.cat([-s_c, s_c]), rtol=1e-12, atol=0)
        assert torch.equal(row_q > 0, row_w >= 0)  # sign(W), sign(0) = +1
    assert not torch.allclose(q.abs(), w.abs().mean(dim=1, keepdim=True).expand_as(q))


def test_fixed_grid_ternary_on_reference_absmean():
    w, r = _candidate_and_reference()
    q = quantize_tensor(w, "ternary", reference=r)
    s = r.abs().mean(dim=1, keepdim=True)
    for row_q, row_w, s_c in zip(q, w, s):
        nz = row_q != 0
        assert torch.allclose(row_q[nz].abs(), s_c.expand(int(nz.sum())), rtol=1e-12, atol=0)
        assert torch.equal(nz, row_w.abs() > s_c / 2)  # round(W / s), clipped to [-1, 1]
        assert torch.equal(torch.sign(row_q[nz]), torch.sign(row_w[nz]))


@pytest.mark.parametrize("pct", [50, 90])
def test_fixed_grid_sparse_ternary_own_mask_reference_scale(pct):
    w, r = _candidate_and_reference()
    k = pct * w.shape[1] // 100
    q = quantize_tensor(w, f"ternary-sparse{pct}", reference=r)
    w_order = torch.argsort(w.abs(), dim=1, stable=True)
    for row_q, row_w, row_r, order in zip(q, w, r, w_order):
        # the mask is the candidate's own: its k smallest |W| are zero
        assert (row_q[order[:k]] == 0).all()
        # the scale is mean |R| over the entries the REFERENCE keeps (its n - k largest)
        s = row_r.abs().sort().values[k:].mean()
        kept = order[k:]
        nz = row_q != 0
        assert torch.allclose(row_q[nz].abs(), s.expand(int(nz.sum())), rtol=1e-12, atol=0)
        assert torch.equal(nz[kept], row_w[kept].abs() > s / 2)
        assert torch.equal(torch.sign(row_q[nz]), torch.sign(row_w[nz]))
        # not the candidate's own kept-mean scale
        assert not torch.isclose(s, row_w[kept].abs().mean(), rtol=1e-3)


def test_fixed_grid_fp32_ignores_reference():
    w, r = _candidate_and_reference()
    assert torch.equal(quantize_tensor(w, "fp32", reference=r), w)
    r_nan = r.clone()
    r_nan[0, 0] = float("nan")
    assert torch.equal(quantize_tensor(w, "fp32", reference=r_nan), w)


@pytest.mark.parametrize("name", ALL_NAMES[1:])
def test_fixed_grid_zero_reference_channel_gives_zero(name):
    w, r = _candidate_and_reference()
    r[3] = 0.0
    q = quantize_tensor(w.float(), name, reference=r)  # a float64 reference for float32 W
    assert q.dtype == torch.float32
    assert (q[3] == 0).all() and not torch.signbit(q[3]).any()  # grid {0}, no -0.0
    assert (q[2] != 0).any()


def test_reference_validation():
    sd = small_model().state_dict()
    ref = copy.deepcopy(sd)
    # extra keys and missing non-quantized keys are fine
    ref_ok = {k: v for k, v in ref.items() if is_quantized_tensor(k, v)} | {"extra": torch.ones(2)}
    assert all(torch.equal(a, b) for a, b in zip(quantize(sd, "int4", reference=ref_ok).values(),
                                                 quantize(sd, "int4").values()))

    missing = {k: v for k, v in ref.items() if k != "fc.weight"}
    for name in ("int8", "fp32"):
        with pytest.raises(ValueError, match=r"reference has no tensor 'fc.weight'"):
            quantize(sd, name, reference=missing)
    wrong_shape = dict(ref, **{"conv.weight": torch.zeros(8, 3, 5, 5)})
    with pytest.raises(ValueError, match=r"reference\['conv.weight'\].*shape \(8, 3, 5, 5\).*\(8, 3, 3, 3\)"):
        quantize(sd, "ternary", reference=wrong_shape)
    transposed = dict(ref, **{"fc.weight": ref["fc.weight"].T.contiguous()})
    with pytest.raises(ValueError, match=r"reference\['fc.weight'\].*shape"):
        quantize(sd, "binary", reference=transposed)
    not_float = dict(ref, **{"emb.weight": torch.zeros(10, 6, dtype=torch.int64)})
    with pytest.raises(ValueError, match=r"reference\['emb.weight'\].*floating point"):
        quantize(sd, "int2", reference=not_float)
    not_tensor = dict(ref, **{"emb.weight": np.zeros((10, 6))})
    with pytest.raises(TypeError, match=r"reference\['emb.weight'\].*torch.Tensor"):
        quantize(sd, "int2", reference=not_tensor)
    with pytest.raises(TypeError, match="reference must be a mapping"):
        quantize(sd, "int2", reference=list(ref.values()))
    nan = copy.deepcopy(ref)
    nan["fc.weight"][0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"reference\['fc.weight'\].*non-finite"):
        quantize(sd, "ternary-sparse50", reference=nan)
    assert torch.equal(quantize(sd, "fp32", reference=nan)["fc.weight"], sd["fc.weight"])

    w = random_weights(4, 6)
    with pytest.raises(ValueError, match=r"shape \(4, 5\)"):
        quantize_tensor(w, "int8", reference=torch.ones(4, 5))
    with pytest.raises(TypeError, match="torch.Tensor"):
        quantize_tensor(w, "int8", reference=np.ones((4, 6)))
    with pytest.raises(ValueError, match="non-finite"):
        quantize_tensor(w, "int8", reference=torch.full((4, 6), float("inf")))
    with pytest.raises(TypeError):
        quantize_tensor(w, "int8", torch.ones(4, 6))  # keyword-only
    with pytest.raises(TypeError):
        quantize(sd, "int8", ref)  # keyword-only


def test_custom_quantizer_receives_reference():
    name = "test-refmax"
    seen: list[bool] = []
    try:

        @register_quantizer(name, bits=1)
        def _refmax(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
            seen.append(reference is weight)
            return torch.full_like(weight, float(reference.abs().max()))

        w, r = random_weights(3, 4, seed=1), random_weights(3, 4, seed=2) * 10
        assert torch.equal(quantize_tensor(w, name), torch.full_like(w, float(w.abs().max())))
        assert torch.equal(quantize_tensor(w, name, reference=r), torch.full_like(w, float(r.abs().max())))
        out = quantize({"fc.weight": w}, name, reference={"fc.weight": r})
        assert torch.equal(out["fc.weight"], torch.full_like(w, float(r.abs().max())))
        assert seen == [True, False, False]  # reference is weight itself when none is given
        assert torch.equal(quantizer_info(name)(w, reference=r), torch.full_like(w, float(r.abs().max())))
    finally:
        QUANTIZERS.unregister(name)
