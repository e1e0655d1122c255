"""Every attack on a real model (sklearn digits, offline): above chance on a model that
memorised its members, at chance on an untrained one."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from attacks import Oracle
from attacks.membership import evaluate_attacks
from attacks.membership.resmia import resmia_scores

from tests.attacks.stubs import BUILTIN


N_MEMBERS = 150
SEED = 0
# Plain 8x8 digits generalise too well for a 150-sample model to be strongly attackable
# (~93% test accuracy): over 10 seeds Res-MIA (K=3, endpoint) averaged AUC 0.58 (min
# 0.53), the baselines 0.65 (min 0.61), while the 3-sigma margin below is 0.074. Fixed
# per-sample pixel noise (part of each sample, like sensor noise) makes the model memorise
# its training images: over 10 seeds Res-MIA then averaged 0.69 (min 0.64), the baselines
# 0.82 (min 0.80). The margin is not relaxed; the model is made to overfit more.
PIXEL_NOISE = 0.3


def _null_auc_sd(n1: int, n0: int) -> float:
    """SD of the AUC (Mann-Whitney U / n1 n0) when scores do not depend on membership."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


def _mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 10),
    )


@pytest.fixture(scope="module")
def digits_setup():
    """Members: 150 random digits; non-members: all the others (1647).

    Returns ``(x, y, member_mask, trained, untrained)``. The split is random, so the
    remaining samples are exchangeable with the members (no class matching needed).
    """
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    noise = np.random.default_rng(1234).standard_normal(x.shape).astype(np.float32)
    x = np.clip(x + PIXEL_NOISE * noise, 0.0, 1.0)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    member = np.zeros(len(y), dtype=bool)
    member[order[:N_MEMBERS]] = True

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny model: threads only add contention on a shared CI box
    try:
        torch.manual_seed(SEED)
        untrained = _mlp()
        torch.manual_seed(SEED)
        trained = _mlp()
        xm, ym = torch.from_numpy(x[member]), torch.from_numpy(y[member])
        opt = torch.optim.Adam(trained.parameters(), lr=1e-3)
        for _ in range(400):  # full batch, until the training set is memorised
            opt.zero_grad()
            nn.functional.cross_entropy(trained(xm), ym).backward()
            opt.step()
        trained.eval()
        with torch.no_grad():
            train_acc = (trained(xm).argmax(1) == ym).float().mean().item()
        assert train_acc == 1.0
        yield torch.from_numpy(x), y, member, trained, untrained
    finally:
        torch.set_num_threads(threads)


def _aucs(model, x, y, member, **resmia_options):
    out = evaluate_attacks(Oracle(model), x, y, member, list(BUILTIN), {"resmia": resmia_options})
    return {name: res.metrics.auc for name, res in out.items()}, out


def test_every_attack_beats_chance_on_an_overfit_model(digits_setup):
    x, y, member, trained, _ = digits_setup
    margin = 3 * _null_auc_sd(member.sum(), (~member).sum())  # ~0.074
    aucs, out = _aucs(trained, x, y, member)
    for name, auc in aucs.items():
        assert auc > 0.5 + margin, (name, aucs)
    assert out["resmia"].queries_per_sample == 4  # 8x8: K = 3
    # the non-member test accuracy is clearly below the 100% training accuracy
    acc = (Oracle(trained).predict_proba(x[~member]).argmax(1) == y[~member]).mean()
    assert acc < 0.9


def test_no_attack_beats_chance_on_an_untrained_model(digits_setup):
    x, y, member, _, untrained = digits_setup
    bound = 4 * _null_auc_sd(member.sum(), (~member).sum())  # ~0.098
    for options in ({}, {"score": "mean-slope"}, {"upsample": "bilinear", "steps": 2}):
        aucs, _ = _aucs(untrained, x, y, member, **options)
        for name, auc in aucs.items():
            assert abs(auc - 0.5) < bound, (name, options, aucs)


def test_resmia_curves_members_start_higher(digits_setup):
    x, _, member, trained, _ = digits_setup
    _, curves = resmia_scores(Oracle(trained), x, return_curves=True)
    mean_member, mean_non = curves[member].mean(0), curves[~member].mean(0)
    assert mean_member[0] > mean_non[0]
    assert np.all(np.diff(mean_member) < 0)  # erosion lowers the mean confidence
