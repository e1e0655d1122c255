"""The GhostAuditor inside an SGD step (mean and sum reductions, relative mode, float32),
the model left untouched, and two sanity cases: an exact duplicate pair has the lowest
GNQ, a mislabeled sample ranks top."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from fedaudit.gnq import GhostAuditor, gnq_scores

from tests.gnq.ghost_vs_naive import RTOL, SEEDS, cnn_groupnorm, double, max_rel_err, mlp

pytestmark = pytest.mark.usefixtures("one_thread_module")


# ----------------------------------------------------------------------------- auditor


def _sgd_step(model, x, y, auditor=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.zero_grad()
    if auditor is None:
        F.cross_entropy(model(x), y).backward()
    else:
        with auditor.capture():
            F.cross_entropy(model(x), y).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    return grads


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_auditor_in_sgd_step(seed):
    model = double(cnn_groupnorm(), seed)
    plain = copy.deepcopy(model)
    before = copy.deepcopy(model)
    x = torch.randn(8, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (8,))
    auditor = GhostAuditor(model, lam=1e-2, loss_reduction="mean")
    grads = _sgd_step(model, x, y, auditor)
    plain_grads = _sgd_step(plain, x, y)
    for g, pg in zip(grads, plain_grads):
        assert torch.equal(g, pg)
    for p, pp in zip(model.parameters(), plain.parameters()):
        assert torch.equal(p, pp)
    scores = auditor.scores()
    ref = gnq_scores(before, x, y, method="naive")
    assert max_rel_err(scores, ref) < RTOL
    assert not model[0]._forward_hooks  # hooks removed on exit


def test_auditor_sum_reduction_and_relative_mode():
    model = double(mlp(), 9)
    x = torch.randn(6, 10, dtype=torch.float64)
    y = torch.randint(0, 4, (6,))
    ref = gnq_scores(model, x, y, method="naive", lam_mode="relative", rho=0.05)
    auditor = GhostAuditor(model, lam_mode="relative", rho=0.05, loss_reduction="sum")
    with auditor.capture():
        F.cross_entropy(model(x), y, reduction="sum").backward()
    assert max_rel_err(auditor.scores(), ref) < RTOL


def test_auditor_float32_close_to_reference():
    torch.manual_seed(11)
    model = cnn_groupnorm()
    x = torch.randn(16, 1, 8, 8)
    y = torch.randint(0, 5, (16,))
    ref = gnq_scores(copy.deepcopy(model).double(), x.double(), y, method="naive")
    auditor = GhostAuditor(model)
    with auditor.capture():
        F.cross_entropy(model(x), y).backward()
    assert max_rel_err(auditor.scores(), ref) < 1e-4


def test_gnq_scores_leaves_model_untouched():
    model = double(cnn_groupnorm(), 1)
    state = copy.deepcopy(model.state_dict())
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (4,))
    for method in ("ghost", "naive"):
        gnq_scores(model, x, y, method=method)
    assert all(p.grad is None for p in model.parameters())
    assert all(not m._forward_hooks and not m._backward_hooks for m in model.modules())
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k])


# ----------------------------------------------------------------------------- sanity


def test_exact_duplicate_pair_has_lowest_gnq():
    model = double(cnn_groupnorm(), 2)
    x = torch.randn(8, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (8,))
    x[5], y[5] = x[2], y[2]
    scores = gnq_scores(model, x, y)
    # g^T (g g^T + A)^{-1} g = q / (1 + q) < 1 for a duplicated g; unique ones have P >> B.
    assert set(scores.argsort()[:2].tolist()) == {2, 5}
    assert scores[2] < 1.0 and scores[5] < 1.0
    assert scores[[0, 1, 3, 4, 6, 7]].min() > 1.0


def test_mislabeled_sample_ranks_top():
    torch.manual_seed(0)
    centers = 3.0 * torch.randn(4, 10)
    labels = torch.randint(0, 4, (400,))
    data = centers[labels] + torch.randn(400, 10)
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        opt.zero_grad()
        F.cross_entropy(model(data), labels).backward()
        opt.step()
    x, y = data[:32].clone(), labels[:32].clone()
    y[13] = (y[13] + 1) % 4
    for mode in ("absolute", "relative"):
        scores = gnq_scores(model, x, y, lam_mode=mode)
        assert scores.argmax().item() == 13, mode
