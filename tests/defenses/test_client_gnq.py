"""GNQ on a client's training: on clipped per-sample gradients (DP-SGD) against the naive
GNQ of hand-clipped gradients and Opacus' per-sample gradients; rows tagged with their
local epoch."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedaudit.training import dp_clipped_gnq, train_local

from tests.defenses.small_client import CFG, CPU, GNQ_ABS, GNQ_REL, client_data, gnq_model


def _opacus_grad_samples(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float):
    """The per-sample gradients the DPOptimizer holds for one batch (one forward/backward
    of the batch mean)."""
    from tests.helpers.opacus_reference import opacus_grad_samples

    return opacus_grad_samples(model, x, y, clip=clip, batch_loss=F.cross_entropy)


def _batch(B=9):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(B, 1, 5, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (B,), generator=g)
    y[1] = y[0]
    x[1] = x[0]  # an exact duplicate: low uniqueness for both
    return x, y


@pytest.mark.parametrize("gnq", [GNQ_ABS, GNQ_REL], ids=["absolute", "relative"])
def test_dp_gnq_without_clipping_equals_naive_gnq(gnq):
    from fedaudit.gnq import gnq_scores, per_sample_gradients

    x, y = _batch()
    model = gnq_model()
    ref = gnq_scores(model, x, y, method="naive", lam=gnq.lam, lam_mode=gnq.lam_mode,
                     rho=gnq.rho)
    G = per_sample_gradients(model, x, y, lambda o, t: F.cross_entropy(o, t, reduction="none"))
    grads = _opacus_grad_samples(model, x, y, clip=1e12)
    # the scale convention: Opacus' rows (loss_reduction="mean") are the gradients of each
    # sample's OWN loss, i.e. already multiplied back by the batch size
    flat = torch.cat([g.reshape(len(g), -1) for g in grads], dim=1)
    torch.testing.assert_close(flat, G, rtol=1e-9, atol=1e-12)
    ours = dp_clipped_gnq(grads, 1e12, gnq)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=0)
    assert ours[0] < ours[2:].min() and ours[1] < ours[2:].min()


@pytest.mark.parametrize("gnq", [GNQ_ABS, GNQ_REL], ids=["absolute", "relative"])
def test_dp_gnq_with_clipping_equals_hand_clipped_naive(gnq):
    from fedaudit.gnq import naive_gnq_from_gradients, per_sample_gradients

    x, y = _batch()
    model = gnq_model()
    G = per_sample_gradients(model, x, y, lambda o, t: F.cross_entropy(o, t, reduction="none"))
    norms = G.norm(dim=1)
    C = float(norms.median())
    f = (C / (norms + 1e-6)).clamp(max=1.0)
    assert (f < 1).any() and (f == 1).any()
    ref = naive_gnq_from_gradients(f[:, None] * G, gnq.lam, gnq.lam_mode, gnq.rho)
    ours = dp_clipped_gnq(_opacus_grad_samples(model, x, y, clip=C), C, gnq)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=0)
    unclipped = naive_gnq_from_gradients(G, gnq.lam, gnq.lam_mode, gnq.rho)
    assert not torch.allclose(ours, unclipped, rtol=1e-3)


def test_dp_gnq_float32_gradients_of_a_wide_layer():
    """float32 per-sample gradients of a wide layer sharing a common direction: the DP
    path accumulates the Gram in float64 and matches a float64 reference."""
    g = torch.Generator().manual_seed(0)
    B, P = 7, 512 * 512
    common = torch.rand(P, generator=g) + 1  # gradients share a large common direction
    w = (torch.rand(B, 1, generator=g) + 0.5) * common + 0.01 * torch.randn(B, P, generator=g)
    grads = [w.reshape(B, 512, 512), torch.randn(B, 512, generator=g)]
    # The case is hard for float32 by construction, not by one CPU's rounding: the exact
    # (float64) Gram's eigenvalues span more than 1e4, while a float32 dot product of 2.6e5
    # terms carries a relative error of up to sqrt(P) * eps32 ~ 3e-5 of the largest one --
    # the size of what GNQ measures.  (Whether a float32 matmul also comes out asymmetric
    # depends on the CPU's kernels, so that is not asserted.)
    K = sum(t.reshape(B, -1).double() @ t.reshape(B, -1).double().T for t in grads)
    ev = torch.linalg.eigvalsh(K)
    assert ev[0] / ev[-1] < 1e-3
    ours = dp_clipped_gnq(grads, 1.0, GNQ_REL)
    ref = dp_clipped_gnq([t.double() for t in grads], 1.0, GNQ_REL)
    # Only the clip factors differ: a float32 norm of 2.6e5 entries (blocked summation) is
    # off by about log2(P) * eps32 ~ 1e-6 relative, which moves GNQ by a few 1e-6 (1.7e-6
    # measured); 1e-5 bounds that, while a float32 Gram would be off by ~1e-2 or more.
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=0)


def test_client_gnq_rows_carry_their_local_epoch():
    """Without DP every sample is scored once per local epoch, tagged with that epoch."""
    x, y = client_data()
    ids = np.arange(3, len(y))  # a client's share of the data
    cfg = dataclasses.replace(CFG, local_epochs=3)
    res = train_local(gnq_model().float(), x, y, ids, cfg, seed=0, device=CPU, gnq=GNQ_ABS)
    assert len(res.gnq_ids) == 3 * len(ids)
    for epoch in (1, 2, 3):
        assert sorted(res.gnq_ids[res.gnq_epochs == epoch]) == sorted(ids)
