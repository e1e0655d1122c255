"""The analytic GNQ floor of bench/gnq.py on a hand-computed model (no timing asserted)."""

from __future__ import annotations

import sys

import torch
import torch.nn as nn

from tests.helpers.paths import ROOT

sys.path.insert(0, str(ROOT))

from bench.gnq import gram_flops  # noqa: E402


def test_gram_flops_hand_computed():
    """B = 2, so every term is 2 B^2 = 8 x (elements of the cheapest per-layer form):
    conv 2->3, 3x3, on 4x4 with padding 1: T = 16, p = 3, d = 18: min(T^2 (p + d) = 5376,
    p d = 54) = 54, bias 3 -> 8 x 57 = 456; GroupNorm(1, 3) affine: 6 -> 48;
    Linear 48 -> 5 (T = 1): min(53, 240) = 53, bias 5 -> 8 x 58 = 464. Total 968."""
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.GroupNorm(1, 3), nn.Flatten(),
                          nn.Linear(48, 5))
    assert gram_flops(model, torch.zeros(2, 2, 4, 4)) == 968
    # no hooks left behind
    assert all(not m._forward_hooks for m in model.modules())
