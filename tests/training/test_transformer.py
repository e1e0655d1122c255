"""The causal character transformer: shapes, causality, the module types it is built of,
its construction from text data, and GNQ per sequence on it (the ghost kernels against
the float64 per-sample-gradient reference)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedaudit.config import validate
from fedaudit.data import build_federated_data
from fedaudit.gnq import GhostAuditor, gnq_scores, naive_gnq_from_gradients, per_sample_gradients
from fedaudit.models import build_text_model, model_for
from fedaudit.models.transformer import sequence_loss

from tests.helpers.paths import SHARED_DATA

pytestmark = pytest.mark.usefixtures("one_thread_module")

TEXT = ("Before we proceed any further, hear me speak. You are all resolved rather to die "
        "than to famish? First, you know Caius Marcius is chief enemy to the people. Let "
        "us kill him, and we'll have corn at our own price. Is't a verdict?")
VOCAB = sorted(set(TEXT))
LAM = 1e-2


def small(seed: int = 0, std: float | None = 0.5, L: int = 16) -> nn.Module:
    """width 32, 2 blocks, 4 heads; ``std``: all parameters N(0, std^2) (0.5: attention
    far from uniform -- the mean top weight over 12 positions is ~0.3, not 1/12)."""
    model = build_text_model("transformer", vocab_size=len(VOCAB), seq_len=L, width=32,
                             layers=2, heads=4, seed=seed)
    if std is not None:
        gen = torch.Generator().manual_seed(100 + seed)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


def batch(B: int = 8, L: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """B windows of TEXT at random offsets (x, next-character y), int64 (B, L)."""
    tokens = torch.tensor([VOCAB.index(c) for c in TEXT])
    starts = torch.randperm(len(TEXT) - L - 1, generator=torch.Generator().manual_seed(seed))[:B]
    x = torch.stack([tokens[s:s + L] for s in starts])
    y = torch.stack([tokens[s + 1:s + L + 1] for s in starts])
    return x, y


def test_shapes_and_parameter_count():
    model = build_text_model("transformer", vocab_size=65, seq_len=80, width=64, layers=2,
                             heads=4)
    x = torch.randint(0, 65, (3, 80))
    assert model(x).shape == (3, 80, 65)
    assert model(x[:, :10]).shape == (3, 10, 65)  # shorter sequences: positions 0..9
    with pytest.raises(ValueError, match="at most 80"):
        model(torch.zeros(1, 81, dtype=torch.long))
    V, L, d = 65, 80, 64  # embeddings, 2 x (2 LN + qkv + out + MLP), final LN, head
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    total = V * d + L * d + 2 * block + 2 * d + d * V + V
    assert sum(p.numel() for p in model.parameters()) == total


def test_built_only_of_modules_with_exact_gnq_kernels():
    model = small()
    owners = {type(m) for m in model.modules() if any(True for _ in m.parameters(recurse=False))}
    assert owners == {nn.Embedding, nn.Linear, nn.LayerNorm}
    assert model.head.weight.data_ptr() != model.tokens.weight.data_ptr()  # not tied


def test_seeded_init_is_reproducible():
    a, b = small(seed=3, std=None), small(seed=3, std=None)
    assert all(torch.equal(u, v) for u, v in zip(a.state_dict().values(), b.state_dict().values()))
    c = small(seed=4, std=None)
    assert not torch.equal(a.tokens.weight, c.tokens.weight)


@pytest.mark.parametrize("t", [0, 5, 15])
def test_causal_changing_token_t_leaves_earlier_logits_unchanged(t):
    model = small().double()
    x, _ = batch(4)
    changed = x.clone()
    changed[:, t] = (changed[:, t] + 1) % len(VOCAB)
    with torch.no_grad():
        a, b = model(x), model(changed)
    assert torch.equal(a[:, :t], b[:, :t])  # masked positions weigh exactly 0
    assert (a[:, t:] - b[:, t:]).abs().amax(-1).gt(1e-6).all()  # t and every later one move


def test_sequence_loss_is_the_mean_token_nll():
    model = small()
    x, y = batch(5)
    logits = model(x)
    per_seq = sequence_loss(logits, y)
    assert per_seq.shape == (5,)
    by_hand = -logits.log_softmax(-1).gather(-1, y.unsqueeze(-1)).squeeze(-1).mean(1)
    torch.testing.assert_close(per_seq, by_hand)
    # the batch mean of it is the usual token-mean loss, the training loss
    torch.testing.assert_close(per_seq.mean(), F.cross_entropy(logits.reshape(-1, len(VOCAB)),
                                                               y.reshape(-1)))


def test_model_for_text_data(tmp_path):
    p = tmp_path / "play.txt"
    p.write_text("\n".join(f"{'AB'[i % 2]}:\n{TEXT[i:i + 60]}\n" for i in range(40)))
    s = validate({"data": {"dataset": "shakespeare", "path": str(p), "seq_len": 12},
                  "model": {"name": "transformer", "width": 16, "layers": 1, "heads": 2},
                  "federation": {"num_clients": 2}})
    data = build_federated_data(s)
    model = model_for(s.model, data, seed=0)
    assert model.positions.num_embeddings == 12 and model.head.out_features == len(data.classes)
    assert model(torch.from_numpy(data.x[:3].copy())).shape == (3, 12, len(data.classes))


# ----------------------------------------------------------------------------- GNQ


def tolerance(G: torch.Tensor, dtype: torch.dtype) -> tuple[float, float]:
    """(tolerance, kappa) of the relative error of GNQ computed in ``dtype``.

    GNQ_j = h_j / (1 - h_j) with h = diag((K + lam I)^-1 K): a relative perturbation e of
    the per-sample gradients (hence of K) moves the scores, to first order, by at most
    about kappa e, kappa = cond(K + lam I) = (s_max + lam) / (s_min + lam) over K's
    eigenvalues s.  Every rounded quantity (activations, output gradients, per-sample
    gradients, the entries of K) is a sum of at most P terms (P = the number of
    parameters; the longest sums are K's inner products over parameters), whose rounding
    error is about sqrt(P) u with u = eps / 2 (probabilistic bound, Higham & Mary 2019,
    SIAM J. Sci. Comput. 41(5)).  Both computations compared carry such an error: 2."""
    s = torch.linalg.eigvalsh(G @ G.T)
    kappa = float((s.max() + LAM) / (s.min().clamp_min(0.0) + LAM))
    u = torch.finfo(dtype).eps / 2
    return 2 * kappa * math.sqrt(G.shape[1]) * u, kappa


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / b.abs()).max())


@pytest.mark.parametrize("seed, B", [(0, 8), (1, 16)])
def test_gnq_per_sequence_matches_float64_reference(seed, B):
    """float64 model: ghost GNQ (every kernel strategy) == the naive parameter-space GNQ
    of per-sample gradients (torch.func) within the float64 bound of :func:`tolerance`.
    The batch holds an exact duplicate (rows 0 and 1), so K is near singular and the
    bound's kappa is large, and windows of one text that share characters.  B = 16 = L
    guards the position lookup: positions looked up unbatched, ``positions(arange(L))``
    broadcast over the batch, give the auditor an "input" whose dim 0 is L, which it
    refuses when B != L but takes for the batch when B == L (2.5 relative error)."""
    model = small(seed).double()
    x, y = batch(B, seed=seed)
    x[1], y[1] = x[0], y[0]
    G = per_sample_gradients(model, x, y, sequence_loss)
    ref = naive_gnq_from_gradients(G, LAM)
    assert ref.std() > 1e-3 * ref.mean() and ref[:2].max() < ref[2:].min()  # duplicates lowest
    tol, kappa = tolerance(G, torch.float64)
    got = gnq_scores(model, x, y, loss_fn=sequence_loss, lam=LAM)
    assert rel_err(got, ref) < tol, (rel_err(got, ref), tol, kappa)
    for strategy in ("ghost", "materialize"):
        auditor = GhostAuditor(model, lam=LAM, loss_reduction="sum", strategy=strategy,
                               gram_dtype=torch.float64)
        with auditor.capture():
            sequence_loss(model(x), y).sum().backward()
        model.zero_grad(set_to_none=True)
        assert rel_err(auditor.scores(), ref) < tol, strategy


def test_gnq_of_a_float32_training_step_matches_float64_reference():
    """The client's in-run GNQ: float32 model, the token-mean loss (mean over the batch of
    the sequence losses, loss_reduction='mean') in an ordinary backward, against the
    float64 reference on a float64 copy; bound of :func:`tolerance` with eps32."""
    model = small(2)
    x, y = batch(8, seed=2)
    ref_model = copy.deepcopy(model).double()
    G = per_sample_gradients(ref_model, x, y, sequence_loss)
    ref = naive_gnq_from_gradients(G, LAM)
    auditor = GhostAuditor(model, lam=LAM, loss_reduction="mean")
    with auditor.capture():
        F.cross_entropy(model(x).reshape(-1, len(VOCAB)), y.reshape(-1)).backward()
    tol, kappa = tolerance(G, torch.float32)
    err = rel_err(auditor.scores(), ref)
    assert err < tol, (err, tol, kappa)
    # the gradient the optimizer sees is untouched by the audit
    plain = copy.deepcopy(model)
    plain.zero_grad()
    F.cross_entropy(plain(x).reshape(-1, len(VOCAB)), y.reshape(-1)).backward()
    for p, q in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_gnq_on_shakespeare_windows():
    """The default-sized model (width 64, 2 blocks, seq_len 80) at its initialisation on
    8 real windows, float64: ghost == reference."""
    from fedaudit.data import load_dataset

    path = SHARED_DATA / "tinyshakespeare.txt"
    if not path.is_file():
        pytest.skip("../shared/data/tinyshakespeare.txt is absent")
    cfg = validate({"data": {"dataset": "shakespeare", "path": str(path)},
                    "model": {"name": "transformer", "width": 64}})
    ds = load_dataset(cfg.data)
    rows = np.random.default_rng(0).choice(len(ds.y), 8, replace=False)
    x, y = torch.from_numpy(ds.x[rows]), torch.from_numpy(ds.y[rows])
    model = build_text_model("transformer", vocab_size=len(ds.classes), seq_len=80, width=64,
                             layers=2, heads=4, seed=0).double()
    G = per_sample_gradients(model, x, y, sequence_loss)
    ref = naive_gnq_from_gradients(G, LAM)
    tol, kappa = tolerance(G, torch.float64)
    err = rel_err(gnq_scores(model, x, y, loss_fn=sequence_loss, lam=LAM), ref)
    assert err < tol, (err, tol, kappa)
