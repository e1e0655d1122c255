"""GNQ precision on adversarial batches, the uncapped 1 - h, and the fused weight gradient.

References are independent of the code under test: the naive parameter-space GNQ on a
float64 copy of the model (torch.func per-sample gradients, one Cholesky solve per
sample; fedaudit/gnq/reference.py) and plain autograd gradients.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fedaudit.gnq import GhostAuditor, gnq_from_gram, gnq_scores, per_sample_gradients
from fedaudit.models import build_model
from fedaudit.scenario import GnqConfig, TrainConfig
from fedaudit.training import train_local


pytestmark = pytest.mark.usefixtures("one_thread_module")


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs() / b.abs()).max().item()


def ce_none(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y, reduction="none")


# ----------------------------------------------------------------------------- no cap


def test_cap_examples_from_the_issue_are_exact():
    """1 - h = lam * diag((K + lam I)^-1): a lone sample with ||g||^2 = 1e8 scores
    ||g||^2 / lam = 1e10, and two such samples with different norms keep different
    scores. float32 input as written in the issue (1e8 and 2e8 are exact in float32).
    Mathematically GNQ = K_jj / lam here; float64 solve and division err by a few eps64,
    hence rtol 1e-12."""
    one = gnq_from_gram(torch.tensor([[1e8]]), 1e-2)
    torch.testing.assert_close(one, torch.tensor([1e10], dtype=torch.float64), rtol=1e-12, atol=0)
    two = gnq_from_gram(torch.tensor([[1e8, 0.0], [0.0, 2e8]]), 1e-2)
    torch.testing.assert_close(two, torch.tensor([1e10, 2e10], dtype=torch.float64),
                               rtol=1e-12, atol=0)
    assert two[1] > two[0]


# ----------------------------------------------------------------------------- near-duplicates


def near_duplicate_batch(delta: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """32 digits-shaped images: 4 random bases, each repeated 8 times, plus delta-noise."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(4, 1, 8, 8, generator=g)
    x = base.repeat(8, 1, 1, 1) + delta * torch.randn(32, 1, 8, 8, generator=g)
    y = torch.arange(4).repeat(8)
    return x.numpy(), y.numpy()


def quickstart_cnn(seed: int = 0) -> nn.Module:
    return build_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=seed)


TRAIN = TrainConfig(local_epochs=1, batch_size=32, optimizer="sgd", lr=0.05, momentum=0.9,
                    weight_decay=0.0, device="cpu")
GNQ = GnqConfig(client=True, server=False, lam=1e-2, lam_mode="absolute", rho=1e-2)


@pytest.mark.parametrize("delta", [1e-2, 1e-3])
def test_near_duplicates_through_training_path_match_float64_reference(delta):
    """Client-side GNQ (train_local, float32 model) on 4 clusters of 8 near-duplicates.

    Bound: the Gram matrix is accumulated in float64 (fedaudit.gnq.kernels.gram), so the
    remaining error is that of the float32 forward and backward themselves (activations,
    output gradients and per-sample gradients carry relative errors of a few eps32 ~ 1e-7,
    which the near-duplicate differences amplify); measured 2e-6 (delta 1e-2) and 3.6e-6
    (delta 1e-3) against the float64 reference, so 1e-5. A float32 Gram of the same
    gradients is off by > 1e-4 (checked below: the batch is adversarial), and was off by
    3.8% through the old float32 path at delta 1e-3."""
    x, y = near_duplicate_batch(delta)
    model = quickstart_cnn()
    before = copy.deepcopy(model)
    res = train_local(model, x, y, np.arange(32), TRAIN, seed=0, device=torch.device("cpu"),
                      gnq=GNQ)
    assert res.steps == 1 and sorted(res.gnq_ids.tolist()) == list(range(32))
    ids = torch.from_numpy(res.gnq_ids)
    xb, yb = torch.from_numpy(x)[ids].double(), torch.from_numpy(y)[ids]
    ref64 = copy.deepcopy(before).double()
    ref = gnq_scores(ref64, xb, yb, method="naive")
    got = torch.from_numpy(res.gnq_scores)
    assert ref.max() / ref.min() > 5  # scores vary, so agreement says something
    assert max_rel_err(got, ref) < 1e-5

    G = per_sample_gradients(ref64, xb, yb, ce_none).float()
    K32 = (G @ G.T).double()  # float32 accumulation of the same (rounded) gradients
    assert max_rel_err(gnq_from_gram(K32, GNQ.lam), ref) > 1e-4


def test_float32_auditor_equals_float64_gram_of_same_tensors():
    """The float32 auditor differs from one whose kernels run entirely in float64 on the
    same captured float32 tensors only by the float32 per-sample gradient of the
    convolutions (computed once, not cancelled): measured ~5e-8 relative, asserted 1e-6."""
    x, y = near_duplicate_batch(1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    model = quickstart_cnn()
    scores = {}
    for dtype in (None, torch.float64):
        auditor = GhostAuditor(model, lam=GNQ.lam, gram_dtype=dtype)
        with auditor.capture():
            F.cross_entropy(model(xt), yt).backward()
        model.zero_grad(set_to_none=True)
        scores[dtype] = auditor.scores()
    assert max_rel_err(scores[None], scores[torch.float64]) < 1e-6


@pytest.mark.parametrize("n", [1, 8191, 8192, 8193, 3 * 8192 + 17])
def test_gram_of_wide_float32_rows_is_the_float64_product(n):
    """gram() converts a wide float32 X to float64 block by block (8192 columns): the
    result is X X^T of the exact float64 copy up to float64 summation order, so both
    are within n * eps64 * |x_i| |x_j| of the exact sums (the products of float32 values
    are exact in float64; Cauchy-Schwarz bounds sum |x_ik x_jk|).  A float32 path would
    err by ~1e-7.  Blocks at, below and across the boundary."""
    from fedaudit.gnq.kernels import gram

    X = torch.randn(5, n, generator=torch.Generator().manual_seed(n)) + 3.0
    X64 = X.double()
    ref = X64 @ X64.T
    got = gram(X)
    assert got.dtype == torch.float64
    norms = X64.norm(dim=1)
    bound = 2 * n * torch.finfo(torch.float64).eps  # each of the two sums within n eps
    assert ((got - ref).abs() / torch.outer(norms, norms)).max().item() <= bound


# ----------------------------------------------------------------------------- fused gradient


def conv_net() -> nn.Module:
    # conv 1: bias-less on the input (its output needs no grad: never fused);
    # conv 2 and 3 materialise their per-sample gradients under "auto" (T = 64, small p d)
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.GroupNorm(2, 4), nn.Tanh(),
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(),
        nn.Conv2d(6, 6, 3, padding="same", padding_mode="reflect", groups=2), nn.Tanh(),
        nn.Flatten(), nn.Linear(6 * 64, 5),
    )


def _grads_and_hook_counts(model, x, y, auditor):
    counts = {}
    handles = []
    for name, p in model.named_parameters():
        counts[name] = 0

        def hook(g, name=name):
            counts[name] += 1

        handles.append(p.register_hook(hook))
    model.zero_grad(set_to_none=True)
    if auditor is None:
        F.cross_entropy(model(x), y).backward()
    else:
        with auditor.capture():
            F.cross_entropy(model(x), y).backward()
    for h in handles:
        h.remove()
    return {n: p.grad.clone() for n, p in model.named_parameters()}, counts


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_weight_gradient_equals_autograd(dtype):
    """fuse_grad=True: materialised conv weights get .grad = sum of the per-sample
    gradients, autograd never computes their gradient (their hook does not fire), the
    scores still equal the naive reference, requires_grad is restored."""
    torch.manual_seed(3)
    model = conv_net().to(dtype)
    x = torch.randn(8, 2, 8, 8, dtype=dtype)
    y = torch.randint(0, 5, (8,))
    plain, plain_counts = _grads_and_hook_counts(model, x, y, None)
    auditor = GhostAuditor(model, loss_reduction="mean", fuse_grad=True)
    fused, counts = _grads_and_hook_counts(model, x, y, auditor)
    assert all(c == 1 for c in plain_counts.values())
    assert counts["3.weight"] == 0 and counts["5.weight"] == 0  # derived, not recomputed
    assert counts["0.weight"] == 1  # input conv without bias: left to autograd
    assert all(counts[n] == 1 for n in counts if n not in ("3.weight", "5.weight"))
    assert all(p.requires_grad for p in model.parameters())
    # float64: the sums differ only in order (~eps64 * sqrt(B T)); float32 likewise with
    # eps32 ~ 6e-8: 1e-12 and 1e-5 relative to the largest entry
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for n in plain:
        scale = plain[n].abs().max().item()
        assert (fused[n] - plain[n]).abs().max().item() <= tol * scale, n
    ref = gnq_scores(copy.deepcopy(model).double(), x.double(), y, method="naive")
    assert max_rel_err(auditor.scores(), ref) < (1e-6 if dtype == torch.float64 else 1e-4)


def test_fused_gradient_accumulates_and_ghost_strategy_is_not_fused():
    torch.manual_seed(4)
    model = conv_net().double()
    x = torch.randn(4, 2, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (4,))
    F.cross_entropy(model(x), y).backward()
    once = model[3].weight.grad.clone()
    auditor = GhostAuditor(model, fuse_grad=True)
    with auditor.capture():
        F.cross_entropy(model(x), y).backward()  # .grad accumulates, as with autograd
    torch.testing.assert_close(model[3].weight.grad, 2 * once, rtol=1e-12, atol=0)
    model.zero_grad(set_to_none=True)
    _, counts = _grads_and_hook_counts(model, x, y,
                                       GhostAuditor(model, fuse_grad=True, strategy="ghost"))
    assert counts["3.weight"] == 1  # ghost form: nothing materialised, autograd computes it


def test_fused_backward_outside_capture_is_an_error():
    model = conv_net().double()
    x = torch.randn(4, 2, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (4,))
    auditor = GhostAuditor(model, fuse_grad=True)
    with auditor.capture():
        loss = F.cross_entropy(model(x), y)
    assert all(p.requires_grad for p in model.parameters())
    with auditor.capture():
        pass
    with pytest.raises(RuntimeError, match="fuse_grad"):
        loss.backward()


def test_train_local_fuse_grad_matches_default_up_to_rounding():
    """train_local(fuse_grad=True) trains the same model as the default up to float32
    rounding of the convolutions' weight gradients (one epoch of 4 steps here; over many
    rounds SGD amplifies such differences, which is why it is off by default)."""
    x, y = near_duplicate_batch(1e-1, seed=5)
    cfg = TrainConfig(local_epochs=1, batch_size=8, optimizer="sgd", lr=0.05, momentum=0.9,
                      weight_decay=0.0, device="cpu")
    models, results = [], []
    for fuse in (False, True):
        model = quickstart_cnn(seed=1)
        results.append(train_local(model, x, y, np.arange(32), cfg, seed=3,
                                   device=torch.device("cpu"), gnq=GNQ, fuse_grad=fuse))
        models.append(model)
    for (n, p), q in zip(models[0].named_parameters(), models[1].parameters()):
        # 4 SGD steps of float32 gradients that differ by summation order: ~1e-7 relative
        assert (p - q).abs().max().item() <= 1e-5 * p.abs().max().item(), n
    np.testing.assert_array_equal(results[0].gnq_ids, results[1].gnq_ids)
    np.testing.assert_allclose(results[1].gnq_scores, results[0].gnq_scores, rtol=1e-4)
