"""Tests of fedaudit.gnq: ghost kernels against the naive parameter-space reference."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fedaudit.gnq import (
    KERNELS,
    GhostAuditor,
    gnq_from_gram,
    gnq_of_updates,
    gnq_scores,
    naive_gnq_from_gradients,
    per_sample_gradients,
    register_kernel,
)

RTOL = 1e-6
SEEDS = [0, 1, 2]


pytestmark = pytest.mark.usefixtures("one_thread_module")


def ce_none(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y, reduction="none")


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape
    return ((a - b).abs() / b.abs().clamp_min(1e-300)).max().item()


def ghost_scores(model, x, y, strategy="auto", loss_fn=ce_none, **kw) -> torch.Tensor:
    """Ghost GNQ through GhostAuditor with a forced kernel strategy (sum-reduced loss)."""
    auditor = GhostAuditor(model, loss_reduction="sum", gram_dtype=torch.float64,
                           strategy=strategy, **kw)
    with auditor.capture():
        loss_fn(model(x), y).sum().backward()
    model.zero_grad(set_to_none=True)
    return auditor.scores()


def check_against_naive(model, x, y, strategies=("auto",), **kw) -> None:
    ref = gnq_scores(model, x, y, method="naive", **kw)
    assert torch.isfinite(ref).all() and (ref > 0).all()
    assert ref.dtype == torch.float64 and ref.shape == (x.shape[0],)
    # The scores must vary across samples, or agreement would prove little.
    assert ref.std() > 1e-3 * ref.mean()
    got = gnq_scores(model, x, y, method="ghost", **kw)
    assert max_rel_err(got, ref) < RTOL
    for strategy in strategies:
        assert max_rel_err(ghost_scores(model, x, y, strategy, **kw), ref) < RTOL, strategy


# ----------------------------------------------------------------------------- models


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 12), nn.ReLU(),
                         nn.Linear(12, 4))


def cnn_groupnorm() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.ReLU(),
        nn.Conv2d(4, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU(inplace=True),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 5),
    )


class SeqModel(nn.Module):
    """Embedding -> Linear on sequences -> LayerNorm -> mean over tokens -> Linear."""

    def __init__(self, vocab: int = 13, dim: int = 6, hidden: int = 8, classes: int = 3,
                 padding_idx: int | None = 0) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=padding_idx)
        self.proj = nn.Linear(dim, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.norm(torch.tanh(self.proj(self.emb(tokens))))  # (B, T, hidden)
        return self.head(h.mean(1))


def double(model: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    for p in model.parameters():  # non-trivial norm affines too
        nn.init.normal_(p, std=0.5)
    return model.double()


# ----------------------------------------------------------------------------- ghost == naive


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


# ----------------------------------------------------------------------------- batch space


@pytest.mark.parametrize("shape", [(6, 40), (8, 5), (5, 5)])
@pytest.mark.parametrize("seed", SEEDS)
def test_gnq_from_gram_matches_definition(shape, seed):
    gen = torch.Generator().manual_seed(seed)
    G = torch.randn(*shape, generator=gen, dtype=torch.float64)
    G[1] *= 3.0
    lam = 0.3
    expected = []
    for j in range(G.shape[0]):
        others = torch.cat([G[:j], G[j + 1:]])
        S = others.T @ others + lam * torch.eye(G.shape[1], dtype=torch.float64)
        expected.append(G[j] @ torch.linalg.solve(S, G[j]))
    expected = torch.stack(expected)
    got = gnq_from_gram(G @ G.T, lam)
    assert got.dtype == torch.float64
    assert max_rel_err(got, expected) < 1e-9
    assert max_rel_err(naive_gnq_from_gradients(G, lam), expected) < 1e-9


def test_naive_span_path_matches_dense_path():
    gen = torch.Generator().manual_seed(7)
    G = torch.randn(6, 300, generator=gen, dtype=torch.float64)
    G[2] = G[0] + 1e-3 * G[2]
    for kw in [dict(), dict(normalize=True), dict(lam_mode="relative", rho=0.05)]:
        dense = naive_gnq_from_gradients(G, 0.1, dense_max_params=10_000, **kw)
        span = naive_gnq_from_gradients(G, 0.1, dense_max_params=10, **kw)
        assert max_rel_err(span, dense) < 1e-8


def test_gnq_of_updates_forms_agree():
    gen = torch.Generator().manual_seed(3)
    U = torch.randn(5, 1000, generator=gen)
    U[4] = U[3]  # an exact duplicate update is not unique
    ref = naive_gnq_from_gradients(U.double(), 1e-2)
    for form in (U, U.numpy(), list(U), [u.numpy() for u in U]):
        assert max_rel_err(gnq_of_updates(form), ref) < 1e-8
    scores = gnq_of_updates(U)
    assert scores[3] < 1.0 and scores[4] < 1.0 and (scores[:3] > 10.0).all()
    with pytest.raises(ValueError, match="update 1 has 3 entries"):
        gnq_of_updates([torch.zeros(4), torch.zeros(3)])
    with pytest.raises(ValueError, match="flat vectors"):
        gnq_of_updates([torch.zeros(2, 2), torch.zeros(2, 2)])
    with pytest.raises(ValueError, match="NaN"):
        gnq_of_updates(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))


def test_relative_lambda_scale_invariance():
    model = double(cnn_groupnorm(), 5)
    x = torch.randn(6, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 5, (6,))
    c = 37.0

    def scaled(out, t):
        return c * ce_none(out, t)

    for method in ("ghost", "naive"):
        rel = gnq_scores(model, x, y, lam_mode="relative", rho=1e-2, method=method)
        rel_c = gnq_scores(model, x, y, loss_fn=scaled, lam_mode="relative", rho=1e-2,
                           method=method)
        assert max_rel_err(rel_c, rel) < 1e-8
        ab = gnq_scores(model, x, y, method=method)
        ab_c = gnq_scores(model, x, y, loss_fn=scaled, method=method)
        assert max_rel_err(ab_c, ab) > 0.1


def test_normalize_option():
    model = double(mlp(), 4)
    x = torch.randn(7, 10, dtype=torch.float64)
    y = torch.randint(0, 4, (7,))
    m, lam = 6, 0.05
    norm = gnq_scores(model, x, y, lam=lam, normalize=True)
    # the naive reference uses the normalised covariance literally
    naive = gnq_scores(model, x, y, lam=lam, normalize=True, method="naive")
    assert max_rel_err(norm, naive) < RTOL
    assert max_rel_err(norm, m * gnq_scores(model, x, y, lam=m * lam)) < 1e-10
    assert max_rel_err(norm, gnq_scores(model, x, y, lam=lam)) > 1e-2
    for mode_kw in (dict(lam_mode="relative", rho=0.02),):
        a = gnq_scores(model, x, y, normalize=True, **mode_kw)
        b = gnq_scores(model, x, y, normalize=True, method="naive", **mode_kw)
        assert max_rel_err(a, b) < RTOL


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


# ----------------------------------------------------------------------------- errors


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
