"""Ghost GNQ kernels (fedaudit/gnq/kernels.py) against the naive parameter-space reference:
MLP, CNN with GroupNorm, Conv2d variants, Conv1d, sequences, RMSNorm and eval BatchNorm,
frozen parameters, a registered kernel, the strategy's cost rule."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from fedaudit.gnq import KERNELS, gnq_scores, register_kernel

from tests.gnq.ghost_vs_naive import (
    SEEDS,
    SeqModel,
    check_against_naive,
    cnn_groupnorm,
    double,
    max_rel_err,
    mlp,
)

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.mark.parametrize("seed", SEEDS)
def test_mlp_matches_naive(seed):
    model = double(mlp(), seed)
    x = torch.randn(8, 10, dtype=torch.float64)
    y = torch.randint(0, 4, (8,))
    check_against_naive(model, x, y)


@pytest.mark.parametrize("seed", SEEDS)
def test_cnn_groupnorm_matches_naive(seed):
    model = double(cnn_groupnorm(), seed)
    x = torch.randn(6, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (6,))
    check_against_naive(model, x, y, strategies=("ghost", "materialize"))


CONV2D_CASES = {
    "strided": dict(kernel_size=3, stride=2),
    "padded": dict(kernel_size=3, padding=2),
    "dilated": dict(kernel_size=3, dilation=2, padding=1),
    "grouped_nobias": dict(kernel_size=3, groups=2, bias=False, padding=1),
    "all": dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
    "same": dict(kernel_size=4, padding="same", dilation=1),
    "reflect": dict(kernel_size=3, padding=1, padding_mode="reflect"),
    "circular": dict(kernel_size=3, padding=2, padding_mode="circular", stride=2),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("seed", SEEDS[:2])
@pytest.mark.parametrize("case", list(CONV2D_CASES))
def test_conv2d_variants_match_naive(case, seed):
    conv = nn.Conv2d(4, 6, **CONV2D_CASES[case])
    model = nn.Sequential(conv, nn.Tanh(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(24, 3))
    model = double(model, seed)
    x = torch.randn(5, 4, 7, 7, dtype=torch.float64)
    y = torch.randint(0, 3, (5,))
    check_against_naive(model, x, y, strategies=("ghost", "materialize"))


@pytest.mark.parametrize("seed", SEEDS)
def test_conv1d_matches_naive(seed):
    model = nn.Sequential(
        nn.Conv1d(3, 4, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv1d(4, 6, 2, dilation=2, groups=2, bias=False, padding=1), nn.Tanh(),
        nn.Conv1d(6, 4, 3, padding="same", padding_mode="replicate"),
        nn.AdaptiveAvgPool1d(2), nn.Flatten(), nn.Linear(8, 3),
    )
    model = double(model, seed)
    x = torch.randn(6, 3, 11, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    check_against_naive(model, x, y, strategies=("ghost", "materialize"))


@pytest.mark.parametrize("seed", SEEDS)
def test_sequence_model_matches_naive(seed):
    model = double(SeqModel(), seed)
    torch.manual_seed(100 + seed)
    tokens = torch.randint(0, 13, (7, 5))
    tokens[0, 1] = 0  # padding token: no gradient to the padding row
    tokens[1] = tokens[2]  # repeated tokens across samples
    tokens[3, :3] = tokens[3, 0]  # repeated tokens within a sample
    y = torch.randint(0, 3, (7,))
    check_against_naive(model, tokens, y, strategies=("ghost", "materialize"))


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_rmsnorm_and_eval_batchnorm_match_naive(seed):
    layers = [nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(36, 6)]
    if hasattr(nn, "RMSNorm"):
        layers.append(nn.RMSNorm(6))
    layers.append(nn.Linear(6, 3))
    model = double(nn.Sequential(*layers), seed)
    bn = model[1]
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    model.eval()
    x = torch.randn(6, 2, 5, 5, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    check_against_naive(model, x, y)


def test_frozen_parameters_are_skipped():
    model = double(cnn_groupnorm(), 3)
    model[0].weight.requires_grad_(False)
    model[1].requires_grad_(False)
    model[8].bias.requires_grad_(False)
    x = torch.randn(6, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (6,))
    check_against_naive(model, x, y)
    full = double(cnn_groupnorm(), 3)
    assert max_rel_err(gnq_scores(full, x, y), gnq_scores(model, x, y)) > 1e-3


def test_registered_custom_kernel():
    class Scale(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * self.weight

    @register_kernel(Scale)
    def scale_kernel(module, a, b, strategy):
        g = (a * b).reshape(a.shape[0], -1, a.shape[-1]).sum(1)
        return g @ g.T

    try:
        model = double(nn.Sequential(nn.Linear(5, 6), Scale(6), nn.Tanh(), nn.Linear(6, 3)), 0)
        x = torch.randn(6, 5, dtype=torch.float64)
        y = torch.randint(0, 3, (6,))
        check_against_naive(model, x, y)
    finally:
        KERNELS.unregister(Scale)


def test_auto_strategy_follows_cost_rule():
    from fedaudit.gnq.kernels import _use_ghost

    # arithmetic: ghost iff B T^2 (p + d) < p d (T + B), while the per-sample block fits
    assert _use_ghost(1, 10, 64, "auto", B=32)  # T = 1: 32*74 < 640*33
    assert _use_ghost(4, 512, 512, "auto", B=32)  # short sequences, wide layer
    assert not _use_ghost(64, 32, 144, "auto", B=32)  # the quickstart CNN's second conv
    # ResNet-18 layer2 conv at batch 64: the memory rule (2 T^2 < p d) would pick ghost at
    # ~340 GFLOP against ~3 GFLOP for per-sample gradients
    assert 2 * 256 * 256 < 128 * 1152 and not _use_ghost(256, 128, 1152, "auto", B=64)
    # a per-sample block over the memory cap falls back to the ghost form
    assert _use_ghost(256, 2048, 2048 * 9, "auto", B=64)
    assert not _use_ghost(64, 32, 144, "materialize") and _use_ghost(64, 32, 144, "ghost")
