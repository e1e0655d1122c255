"""quantize() on a state dict: which tensors are quantized, every quantizer round-trips
through load_state_dict, fp32 is an identity copy, input checks."""

from __future__ import annotations

import copy

import pytest
import torch

from fedaudit.quant import is_quantized_tensor, quantize, quantizer_info

from tests.quant.weights import ALL_NAMES, INT_BITS, level_count, small_model


def test_selection_rule():
    sd = small_model().state_dict()
    selected = {k for k, v in sd.items() if is_quantized_tensor(k, v)}
    assert selected == {"conv.weight", "emb.weight", "fc.weight"}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_state_dict_roundtrip_every_quantizer(name):
    model = small_model()
    sd = model.state_dict()
    before = copy.deepcopy(sd)
    out = quantize(sd, name)

    for k in sd:  # input not mutated
        assert torch.equal(sd[k], before[k])
    assert list(out) == list(sd)
    for k, v in out.items():
        assert v.shape == sd[k].shape and v.dtype == sd[k].dtype
        assert v.data_ptr() != sd[k].data_ptr()  # new tensors
    for k in ("conv.bias", "fc.bias", "norm.weight", "norm.bias", "num_updates", "mask_weight"):
        assert torch.equal(out[k], sd[k]), k

    quantized = ("conv.weight", "emb.weight", "fc.weight")
    for k in quantized:  # no -0.0: identical quantized models are byte-identical
        assert not torch.signbit(out[k][out[k] == 0]).any(), k
    if name == "fp32":
        for k in quantized:
            assert torch.equal(out[k], sd[k])
    else:
        spec = quantizer_info(name)
        max_levels = 2 ** spec.bits - 1 if name in INT_BITS else 3
        for k in quantized:
            rows = out[k].reshape(out[k].shape[0], -1)
            assert all(level_count(r) <= max_levels for r in rows), k
            assert not torch.equal(out[k], sd[k]), k

    model.load_state_dict(out, strict=True)
    x = torch.randn(2, 3, 8, 8)
    tokens = torch.tensor([[1, 2, 3], [4, 5, 9]])
    assert torch.isfinite(model(x, tokens)).all()


def test_fp32_is_identity_copy():
    sd = small_model().state_dict()
    out = quantize(sd, "fp32")
    assert all(torch.equal(out[k], sd[k]) for k in sd)
    out["fc.weight"].add_(1.0)
    assert not torch.equal(out["fc.weight"], sd["fc.weight"])


def test_quantize_validation():
    with pytest.raises(TypeError, match="mapping"):
        quantize([("fc.weight", torch.ones(2, 2))], "int8")
    with pytest.raises(TypeError, match="'fc.weight'"):
        quantize({"fc.weight": [[1.0, 2.0]]}, "int8")
    bad = {"fc.weight": torch.tensor([[1.0, float("nan")], [1.0, 2.0]]), "fc.bias": torch.zeros(2)}
    with pytest.raises(ValueError, match=r"'fc.weight'.*non-finite"):
        quantize(bad, "ternary")
    assert torch.equal(quantize(bad, "fp32")["fc.bias"], bad["fc.bias"])  # pass-through
