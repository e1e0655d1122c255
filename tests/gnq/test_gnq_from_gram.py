"""GNQ in batch space: from the Gram matrix against its definition, the naive span path,
the forms of GNQ of updates, the relative lambda's scale invariance, normalisation."""

from __future__ import annotations

import pytest
import torch

from fedaudit.gnq import gnq_from_gram, gnq_of_updates, gnq_scores, naive_gnq_from_gradients

from tests.gnq.ghost_vs_naive import (
    RTOL,
    SEEDS,
    ce_none,
    cnn_groupnorm,
    double,
    max_rel_err,
    mlp,
)

pytestmark = pytest.mark.usefixtures("one_thread_module")


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
