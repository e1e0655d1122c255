"""Local DP-SGD (Opacus) in train_local: deterministic, Poisson batches, the clipped mean
plus the documented noise, and its effect on the LOSS attack in a small federation."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from fedaudit.config import load_scenario
from fedaudit.training import train_local

from tests.defenses.small_client import CFG, CPU, GNQ_ABS, client_data, gnq_model


def _train_dp(seed, noise=1.0, clip=1.0, ids=None, cfg=CFG, gnq=GNQ_ABS):
    x, y = client_data()
    model = gnq_model().float()
    ids = np.arange(len(y)) if ids is None else ids
    res = train_local(model, x, y, ids, cfg, seed=seed, device=CPU, gnq=gnq,
                      dp={"noise_multiplier": noise, "clip_norm": clip})
    return model, res


def test_dpsgd_training_is_deterministic_and_reports_accounting_inputs():
    ids = np.arange(3, 37)  # a client's share: sample ids are not 0..n-1
    m1, r1 = _train_dp(5, ids=ids)
    m2, r2 = _train_dp(5, ids=ids)
    m3, r3 = _train_dp(6, ids=ids)
    for k, v in m1.state_dict().items():
        assert torch.equal(v, m2.state_dict()[k])
    assert not all(torch.equal(v, m3.state_dict()[k]) for k, v in m1.state_dict().items())
    assert np.array_equal(r1.gnq_ids, r2.gnq_ids) and np.array_equal(r1.gnq_scores, r2.gnq_scores)
    n = len(ids)
    assert r1.dp_steps == r1.steps == CFG.local_epochs * math.ceil(n / 8)
    assert r1.dp_sample_rate == pytest.approx(1 / math.ceil(n / 8))
    assert set(r1.gnq_ids) <= set(ids) and np.all(np.isfinite(r1.gnq_scores))
    assert len(r1.gnq_epochs) == len(r1.gnq_ids) and set(r1.gnq_epochs) == {1, 2}
    assert np.all(np.diff(r1.gnq_epochs) >= 0)  # in training order
    assert np.isfinite(r1.loss)
    assert not hasattr(next(m1.parameters()), "grad_sample") or \
        next(m1.parameters()).grad_sample is None  # Opacus detached from the model


def test_dpsgd_survives_empty_poisson_batches():
    cfg = dataclasses.replace(CFG, batch_size=1, local_epochs=4)
    model, res = _train_dp(0, ids=np.arange(3), cfg=cfg)  # q = 1/3: empty batches are likely
    assert res.dp_steps == 12 and np.isfinite(res.loss)
    assert len(res.gnq_ids) != 12  # Poisson batches: not one sample per step
    assert all(torch.isfinite(v).all() for v in model.state_dict().values())


def test_dpsgd_step_is_clipped_mean_plus_documented_noise():
    """batch_size = n: q = 1, every sample in the one step, so the noiseless update is
    lr * mean of clipped per-sample gradients (norm <= lr * C) and the noise on it has std
    lr * sigma * C / n per coordinate."""
    x, y = client_data()
    start = {k: v.clone() for k, v in gnq_model().float().state_dict().items()}
    lr, C, sigma, n = 0.05, 0.01, 1.0, 37
    cfg = dataclasses.replace(CFG, momentum=0.0, local_epochs=1, batch_size=n, lr=lr)
    updates = {}
    for noise in (0.0, sigma):
        model = gnq_model().float()
        res = train_local(model, x, y, np.arange(n), cfg, seed=2, device=CPU, gnq=None,
                          dp={"noise_multiplier": noise, "clip_norm": C})
        assert res.dp_steps == 1 and res.dp_sample_rate == 1.0
        updates[noise] = torch.cat([(model.state_dict()[k] - start[k]).flatten() for k in start])
    assert updates[0.0].norm() <= lr * C * (1 + 1e-5)
    noise = (updates[sigma] - updates[0.0]).double()
    assert noise.std().item() == pytest.approx(lr * sigma * C / n, rel=0.15)


# ---------------------------------------------------------------- privacy effect

def _federated_loss_auc(noise: float | None) -> tuple[float, float]:
    """A small overfit federation trained in-process (FedAvg of train_local, no Flower):
    (test accuracy, pooled LOSS-attack AUC with class-matched holdout non-members)."""
    from sklearn.metrics import roc_auc_score

    from fedaudit.data import build_federated_data
    from fedaudit.models import model_for
    from fedaudit.audit.sets import attack_sets
    from fedaudit.training import client_seed
    from fedaudit.training import per_sample_losses

    s = load_scenario("defense-none", ["federation.rounds=3"])
    d = build_federated_data(s)
    g = model_for(s.model, d, seed=s.seed)
    state = {k: v.clone() for k, v in g.state_dict().items()}
    dp = None if noise is None else {"noise_multiplier": noise, "clip_norm": 1.0}
    for r in range(1, s.federation.rounds + 1):
        states = []
        for c in range(len(d.clients)):
            m = model_for(s.model, d, seed=s.seed)
            m.load_state_dict(state)
            train_local(m, d.x, d.y, d.clients[c], s.train, seed=client_seed(0, r, c),
                        device=CPU, dp=dp)
            states.append(m.state_dict())
        state = {k: sum(st[k] for st in states) / len(states) for k in state}
    g.load_state_dict(state)
    sets = attack_sets(s, d)
    mem = np.concatenate([x.members for x in sets])
    non = np.concatenate([x.nonmembers for x in sets])
    lm, _ = per_sample_losses(g, d.x[mem], d.y[mem], device=CPU)
    ln, _ = per_sample_losses(g, d.x[non], d.y[non], device=CPU)
    auc = roc_auc_score(np.r_[np.ones(len(lm)), np.zeros(len(ln))], -np.r_[lm, ln])
    _, correct = per_sample_losses(g, d.x[d.test], d.y[d.test], device=CPU)
    return float(correct.mean()), float(auc)


def test_strong_dpsgd_noise_pushes_loss_attack_towards_chance(one_thread):
    acc0, auc0 = _federated_loss_auc(None)
    acc1, auc1 = _federated_loss_auc(4.0)
    assert auc0 > 0.58, (acc0, auc0)  # the undefended federation leaks (about 0.60)
    assert abs(auc1 - 0.5) < 0.05 and auc1 < auc0 - 0.08, (acc1, auc1)  # about 0.50
