"""What GNQ refuses, with messages that say why: BatchNorm in training mode, unknown layers
with parameters, bad inputs, auditor misuse, Gram edge cases; per-sample gradients'
shapes, large scores neither capped nor tied."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fedaudit.gnq import GhostAuditor, gnq_from_gram, gnq_scores, per_sample_gradients

from tests.gnq.ghost_vs_naive import ce_none, mlp

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_batchnorm_in_training_mode_is_rejected():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(144, 3))
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
    for method in ("ghost", "naive"):
        with pytest.raises(ValueError, match="BatchNorm.*GroupNorm") as info:
            gnq_scores(model, x, y, method=method)
        assert "'1'" in str(info.value)  # names the module
    with pytest.raises(ValueError, match="GroupNorm"):
        with GhostAuditor(model).capture():
            pass
    model[1].requires_grad_(False)  # frozen but still batch statistics
    with pytest.raises(ValueError, match="BatchNorm"):
        gnq_scores(model, x, y)


def test_unknown_parametrised_layer_is_rejected():
    class Mystery(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * self.w

    model = nn.Sequential(nn.Linear(4, 3), Mystery())
    x, y = torch.randn(4, 4), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match=r"'1' \(Mystery\).*register_kernel"):
        gnq_scores(model, x, y)
    model[1].w.requires_grad_(False)
    assert gnq_scores(model, x, y).shape == (4,)
    assert gnq_scores(nn.Sequential(nn.Linear(4, 3), Mystery()), x, y, method="naive").shape == (4,)


def test_input_validation_messages():
    model = mlp()
    x, y = torch.randn(4, 10), torch.randint(0, 4, (4,))
    with pytest.raises(ValueError, match="method must be one of"):
        gnq_scores(model, x, y, method="fast")
    with pytest.raises(ValueError, match="lam must be"):
        gnq_scores(model, x, y, lam=0.0)
    with pytest.raises(ValueError, match="lam must be"):
        gnq_from_gram(torch.eye(3), -1.0)
    with pytest.raises(ValueError, match="lam_mode must be one of"):
        gnq_scores(model, x, y, lam_mode="scaled")
    with pytest.raises(ValueError, match="rho must be"):
        gnq_scores(model, x, y, lam_mode="relative", rho=-1.0)
    with pytest.raises(ValueError, match="square"):
        gnq_from_gram(torch.ones(3, 2), 0.1)
    with pytest.raises(ValueError, match="symmetric"):
        gnq_from_gram(torch.tensor([[1.0, 0.5], [0.0, 1.0]]), 0.1)
    with pytest.raises(ValueError, match="NaN"):
        gnq_from_gram(torch.tensor([[1.0, float("nan")], [float("nan"), 1.0]]), 0.1)
    with pytest.raises(ValueError, match="one loss per sample"):
        gnq_scores(model, x, y, loss_fn=F.cross_entropy)
    with pytest.raises(ValueError, match="one loss per sample"):
        gnq_scores(model, x, y, loss_fn=F.cross_entropy, method="naive")
    with pytest.raises(ValueError, match="loss_reduction"):
        GhostAuditor(model, loss_reduction="batchmean")
    with pytest.raises(ValueError, match="at least 2"):
        gnq_scores(model, x[:1], y[:1], normalize=True)


def test_auditor_misuse_errors():
    lin = nn.Linear(3, 3)
    model = nn.Sequential(lin, nn.Tanh(), lin)
    auditor = GhostAuditor(model)
    with pytest.raises(RuntimeError, match="called more than once"):
        with auditor.capture():
            model(torch.randn(2, 3))
    auditor = GhostAuditor(mlp())
    with pytest.raises(RuntimeError, match="no gradients were captured"):
        auditor.scores()
    with auditor.capture():
        with torch.no_grad():
            auditor.model(torch.randn(2, 10))  # ignored: no graph
        auditor.model(torch.randn(2, 10)).sum().backward()
    assert auditor.scores().shape == (2,)


def test_gnq_from_gram_edge_cases():
    # B = 1: GNQ = |g|^2 / lam
    assert gnq_from_gram(torch.tensor([[4.0]]), 0.5).item() == pytest.approx(8.0)
    # relative mode with all-zero gradients gives zeros, not NaN
    from fedaudit.gnq import gnq_from_gram_options

    z = gnq_from_gram_options(torch.zeros(3, 3), lam_mode="relative")
    assert torch.equal(z, torch.zeros(3, dtype=torch.float64))
    # clamp keeps a huge K finite
    big = gnq_from_gram(torch.full((2, 2), 1e30) + torch.diag(torch.tensor([1e30, 0.0])), 1e-2)
    assert torch.isfinite(big).all()


def test_per_sample_gradients_shape():
    model = mlp()
    x, y = torch.randn(3, 10), torch.randint(0, 4, (3,))
    G = per_sample_gradients(model, x, y, ce_none)
    P = sum(p.numel() for p in model.parameters())
    assert G.shape == (3, P) and G.dtype == torch.float64
    # rows sum to the batch gradient of the summed loss
    model.zero_grad()
    ce_none(model(x), y).sum().backward()
    flat = torch.cat([p.grad.flatten() for p in model.parameters()]).double()
    assert torch.allclose(G.sum(0), flat, atol=1e-5)


def test_large_scores_are_neither_capped_nor_tied():
    """1 - h is computed as lam * diag((K + lam I)^-1), not as 1 minus h: a single sample
    with ||g||^2 = 1e8 scores ||g||^2 / lam = 1e10 exactly (relative error ~ eps64 * 1e10
    / 1e10), and two such samples with different norms keep different scores."""
    one = gnq_from_gram(torch.tensor([[1e8]], dtype=torch.float64), 1e-2)
    assert abs(one.item() / 1e10 - 1) < 1e-9
    two = gnq_from_gram(torch.tensor([[1e8, 0.0], [0.0, 2e8]], dtype=torch.float64), 1e-2)
    torch.testing.assert_close(two, torch.tensor([1e10, 2e10], dtype=torch.float64),
                               rtol=1e-9, atol=0)
