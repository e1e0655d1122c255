"""Plug-ins a user registers in their own process (a notebook, a script): a dataset, an
attack with an option and a quantizer, registered by the ``plugins`` fixture."""

import numpy as np
import pytest
import torch

from attacks import register_attack
from fedaudit.data import DATASETS, Dataset, register_dataset
from fedaudit.quant import QUANTIZERS, register_quantizer
from attacks.membership.registry import ATTACKS
from fedaudit.options import option


@pytest.fixture()
def plugins():
    """A dataset, an attack with an option and a quantizer, registered here."""

    @register_dataset("api-stripes")
    def stripes(cfg):
        rng = np.random.default_rng(0)
        y = np.arange(200) % 2
        x = rng.random((200, 1, 8, 8)).astype(np.float32) * 0.5
        x[y == 1, :, ::2, :] += 0.5  # class 1: horizontal stripes
        return Dataset("api-stripes", x.clip(0, 1), y.astype(np.int64), ("plain", "stripes"))

    @register_attack("api-top", label="top-prob",
                     options={"power": option(float, 1.0, "exponent", min=0.0)})
    def top(oracle, x, y, *, power=1.0):
        return oracle.predict_proba(x).max(axis=1) ** power

    @register_quantizer("api-half", bits=16)
    def half(weight, reference):
        return weight.to(torch.float16).to(weight.dtype)

    yield
    DATASETS.unregister("api-stripes")
    ATTACKS.unregister("api-top")
    QUANTIZERS.unregister("api-half")
