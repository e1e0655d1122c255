"""The quantizer registry (fedaudit.quant): names, bits and sparsity, general sparse names,
errors that list what is allowed, one registered function; fedaudit.quant without Flower."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from fedaudit.quant import (
    QUANTIZERS,
    TERNARY_BITS,
    quantize,
    quantizer_info,
    register_quantizer,
)

from tests.helpers.paths import ROOT
from tests.quant.weights import BUILTIN, random_weights


def test_core_does_not_import_flower():
    code = "import sys, fedaudit.quant; print(any(m.split('.')[0] == 'flwr' for m in sys.modules))"
    root = ROOT
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registry_names_bits_sparsity():
    assert set(BUILTIN) <= set(QUANTIZERS)
    assert TERNARY_BITS == round(math.log2(3), 2) == 1.58
    expected_bits = {"fp32": 32, "int8": 8, "int4": 4, "int2": 2, "binary": 1}
    for name, bits in expected_bits.items():
        assert QUANTIZERS[name].bits == bits
        assert QUANTIZERS[name].sparsity == 0.0
    for name in ("ternary", "ternary-sparse50", "ternary-sparse90"):
        assert QUANTIZERS[name].bits == TERNARY_BITS
    assert QUANTIZERS["ternary"].sparsity == 0.0
    assert QUANTIZERS["ternary-sparse50"].sparsity == 0.5
    assert QUANTIZERS["ternary-sparse90"].sparsity == 0.9
    for name in BUILTIN:
        assert quantizer_info(name) is QUANTIZERS[name]


@pytest.mark.parametrize("pct", [1, 29, 37, 99])
def test_quantizer_info_resolves_general_sparse(pct):
    spec = quantizer_info(f"ternary-sparse{pct}")
    assert spec.name == f"ternary-sparse{pct}"
    assert spec.bits == TERNARY_BITS
    assert spec.sparsity == pct / 100
    w = random_weights(4, 100)
    q = spec(w).double()
    assert ((q == 0).sum(dim=1) >= pct).all()  # 100 entries per channel: pct% pruned
    # the scale is the mean |W| over exactly the 100 - pct largest magnitudes
    s = w.abs().double().sort(dim=1).values[:, pct:].mean(dim=1, keepdim=True)
    nz = q != 0
    assert torch.allclose(q.abs()[nz], s.expand_as(q)[nz], rtol=1e-6)  # float32 output


@pytest.mark.parametrize(
    "bad", ["int3", "INT8", "ternary-sparse0", "ternary-sparse100", "ternary-sparse05", "ternary-sparse", "", None]
)
def test_unknown_quantizer_lists_allowed_names(bad):
    with pytest.raises(ValueError) as err:
        quantizer_info(bad)
    for name in BUILTIN:
        assert name in str(err.value)
    assert "ternary-sparseXX" in str(err.value)
    with pytest.raises(ValueError):
        quantize({"w.weight": random_weights(2, 3)}, bad)


def test_register_quantizer_adds_one_function():
    name = "test-halve"
    try:

        @register_quantizer(name, bits=16)
        def _halve(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
            return weight / 2

        assert quantizer_info(name).bits == 16.0 and quantizer_info(name).sparsity == 0.0
        sd = {"fc.weight": random_weights(3, 4), "fc.bias": torch.ones(3)}
        out = quantize(sd, name)
        assert torch.equal(out["fc.weight"], sd["fc.weight"] / 2)
        assert torch.equal(out["fc.bias"], sd["fc.bias"])
        with pytest.raises(ValueError, match="already registered"):
            register_quantizer(name, bits=16)(_halve)
    finally:
        QUANTIZERS.unregister(name)
    # a quantizer of the former one-argument form fn(weight) is refused at registration
    with pytest.raises(TypeError, match=r"fn\(weight, reference\)"):

        @register_quantizer("test-bad", bits=8)
        def _old_style(weight: torch.Tensor) -> torch.Tensor:
            return weight

    with pytest.raises(ValueError, match="bits"):
        register_quantizer("test-bad", bits=0)
    with pytest.raises(ValueError, match="sparsity"):
        register_quantizer("test-bad", bits=1, sparsity=1.0)
    assert "test-bad" not in QUANTIZERS
