"""Privacy accounting (fedaudit.defenses.accounting): DP-SGD's epsilon against Opacus'
accountant and PrivacyEngine, the Gaussian mechanism per round, the defense summary."""

import json
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedaudit.config import load_scenario
from fedaudit.defenses import defense_summary
from fedaudit.defenses.accounting import dpsgd_epsilon, gaussian_epsilon, json_epsilon
from fedaudit.scenario import TrainConfig
from fedaudit.training import train_local

from tests.defenses.small_client import CPU


def test_dpsgd_epsilon_matches_opacus_accountant_stepwise():
    from opacus.accountants import RDPAccountant

    sigma, q, steps, delta = 1.1, 1 / 7, 420, 1e-5
    acc = RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    ref = acc.get_epsilon(delta=delta)
    eps = dpsgd_epsilon(sigma, q, steps, delta)
    assert math.isfinite(eps) and eps > 0
    assert eps == pytest.approx(ref, rel=1e-12)
    # composition over rounds: two rounds of 210 steps = one history of 420
    assert dpsgd_epsilon(sigma, q, 210, delta) < eps


def test_dpsgd_epsilon_matches_privacy_engine_after_real_training():
    """The rate and step count train_local reports give the epsilon Opacus' own
    PrivacyEngine accounts for the same training."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 1, 4, 4, generator=g)
    y = torch.randint(0, 3, (50,), generator=g)
    cfg = TrainConfig(local_epochs=3, batch_size=8, optimizer="sgd", lr=0.05, momentum=0.0,
                      weight_decay=0.0, device="cpu")
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    res = train_local(model, x.numpy(), y.numpy(), np.arange(50), cfg, seed=1, device=CPU,
                      dp={"noise_multiplier": 0.9, "clip_norm": 1.0})
    assert res.dp_steps == 3 * math.ceil(50 / 8) and res.dp_sample_rate == 1 / math.ceil(50 / 8)

    model2 = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model2.parameters(), lr=0.05)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="rdp", secure_mode=False)  # (default: "prv")
        m, o, dl = engine.make_private(module=model2, optimizer=opt, data_loader=loader,
                                       noise_multiplier=0.9, max_grad_norm=1.0,
                                       poisson_sampling=True)
        for _ in range(3):
            for xb, yb in dl:
                o.zero_grad()
                F.cross_entropy(m(xb), yb, reduction="sum").div(max(len(yb), 1)).backward()
                o.step()
    assert engine.get_epsilon(1e-5) == pytest.approx(
        dpsgd_epsilon(0.9, res.dp_sample_rate, res.dp_steps, 1e-5), rel=1e-12)


def test_no_noise_is_infinite_never_nan():
    assert dpsgd_epsilon(0.0, 0.2, 100, 1e-5) == math.inf
    assert gaussian_epsilon(0.0, 5, 1e-5) == math.inf
    assert dpsgd_epsilon(1.0, 0.2, 0, 1e-5) == 0.0
    assert json_epsilon(math.inf) == "inf" and json_epsilon(None) is None


def test_client_level_epsilon_is_the_gaussian_mechanism():
    sigma, T, delta = 2.0, 10, 1e-5
    eps = gaussian_epsilon(sigma, T, delta)
    rdp = T / (2 * sigma ** 2)  # RDP(alpha) = alpha * T / (2 sigma^2)
    # classical RDP -> DP conversion at the best alpha is an upper bound of Opacus' tighter one
    classical = rdp + 2 * math.sqrt(rdp * math.log(1 / delta))
    assert rdp < eps <= classical * 1.01
    assert gaussian_epsilon(sigma, 2 * T, delta) > eps


def test_defense_summary_json_shapes():
    scen = load_scenario("quickstart", ["defense.kind=dp-sgd", "defense.noise_multiplier=0",
                                        "federation.num_clients=3"])
    rounds = [{"round": 1, "aggregated": True, "dp_steps": {"0": 6, "1": 6},
               "dp_sample_rate": {"0": 1 / 6, "1": 1 / 6}}]
    out = defense_summary(scen, rounds)
    text = json.dumps(out, allow_nan=False)
    assert out["epsilon"] == "inf" and out["epsilon_per_client"] == ["inf", "inf", None]
    assert any("inf" in n for n in out["notes"]) and "Poisson" in out["accounting"]
    assert json.loads(text)["delta"] == 1e-5

    scen = load_scenario("quickstart", ["defense.kind=dp-sgd", "federation.num_clients=3"])
    rounds.append({"round": 2, "aggregated": True, "dp_steps": {"0": 6, "2": 7},
                   "dp_sample_rate": {"0": 1 / 6, "2": 1 / 7}})
    out = defense_summary(scen, rounds)
    per = out["epsilon_per_client"]
    assert per[0] == pytest.approx(dpsgd_epsilon(1.0, 1 / 6, 12, 1e-5))
    assert per[1] == pytest.approx(dpsgd_epsilon(1.0, 1 / 6, 6, 1e-5))
    assert per[2] == pytest.approx(dpsgd_epsilon(1.0, 1 / 7, 7, 1e-5))
    assert out["epsilon"] == max(per) and out["steps_per_client"] == [12, 6, 7]

    none = defense_summary(load_scenario("quickstart"), rounds)
    assert none["kind"] == "none" and none["epsilon"] is None
    srv = defense_summary(load_scenario("quickstart", ["defense.kind=dp-server"]),
                          [{"aggregated": True}, {"aggregated": False}, {"aggregated": True}])
    assert srv["releases"] == 2 and srv["epsilon"] == pytest.approx(gaussian_epsilon(1.0, 2, 1e-5))
    clip = defense_summary(load_scenario("quickstart", ["defense.kind=clip"]), [])
    assert clip["epsilon"] == "inf" and clip["noise_multiplier"] == 0.0
