"""Small models and the check of ghost GNQ against the naive parameter-space reference,
shared by the GNQ tests."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from fedaudit.gnq import GhostAuditor, gnq_scores


RTOL = 1e-6
SEEDS = [0, 1, 2]


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
