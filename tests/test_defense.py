"""The ``[defense]`` section: DP-SGD (Opacus), Flower's DP wrappers, clipping, accounting,
GNQ on clipped per-sample gradients, and the privacy effect on the LOSS attack."""

import dataclasses
from pathlib import Path
import json
import math
import warnings

import numpy as np
import pytest
from conftest import result_numbers
import torch
import torch.nn.functional as F
from flwr.app import (ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord,
                      RecordDict)
from torch import nn

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.defenses import defense_summary
from fedaudit.defenses.accounting import dpsgd_epsilon, gaussian_epsilon, json_epsilon
from fedaudit.scenario import GnqConfig, TrainConfig
from fedaudit.training import dp_clipped_gnq, train_local

CPU = torch.device("cpu")
GNQ_ABS = GnqConfig(client=True, server=True, lam=1e-2, lam_mode="absolute", rho=1e-2)
GNQ_REL = dataclasses.replace(GNQ_ABS, lam_mode="relative")


# ---------------------------------------------------------------- config validation

@pytest.mark.parametrize("override, fragment", [
    ("defense.kind=dp-magic", "unknown choice"),
    ("defense.noise_multiplier=-0.5", "out of range"),
    ("defense.clip_norm=0", "out of range"),
    ("defense.clip_norm=-1.0", "out of range"),
    ("defense.delta=0", "out of range"),
    ("defense.delta=1", "out of range"),
    ("defense.delta=1.5", "out of range"),
    ("defense.delta=-1e-5", "out of range"),
    ("defense.epsilon=3", "unknown key"),
])
def test_defense_key_errors(override, fragment):
    with pytest.raises(ScenarioError) as exc:
        load_scenario("quickstart", [override])
    msg = str(exc.value)
    assert fragment in msg and "defense" in msg and "\n" not in msg


def test_defense_defaults_and_cross_checks():
    s = load_scenario("quickstart")
    assert s.defense.kind == "none"
    assert dict(s.defense.options) == {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-5}
    with pytest.raises(ScenarioError, match="federation.strategy = 'FedAvg'"):
        load_scenario("quickstart", ["defense.kind=dp-server", "federation.strategy=FedMedian"])
    # no noise: no accounting, any aggregator may be clipped
    load_scenario("quickstart", ["defense.kind=dp-server", "defense.noise_multiplier=0",
                                 "federation.strategy=FedMedian"])
    load_scenario("quickstart", ["defense.kind=clip", "federation.strategy=Krum"])
    load_scenario("quickstart", ["defense.kind=dp-sgd", "federation.strategy=FedAdam"])


@pytest.mark.parametrize("name", ["defense-none", "defense-dpsgd", "defense-dpserver",
                                  "defense-dpclient", "defense-clip"])
def test_defense_scenarios_are_bundled(name):
    s = load_scenario(name)
    assert s.defense.kind == name.split("-", 1)[1].replace("dpsgd", "dp-sgd") \
        .replace("dpserver", "dp-server").replace("dpclient", "dp-client")


# ---------------------------------------------------------------- accounting

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


# ---------------------------------------------------------------- GNQ on clipped grads

def _gnq_model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.GroupNorm(1, 3), nn.ReLU(),
                         nn.Flatten(), nn.Linear(3 * 5 * 5, 8), nn.ReLU(),
                         nn.Linear(8, 4)).double()


def _opacus_grad_samples(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float):
    """The per-sample gradients the DPOptimizer holds for one batch (one forward/backward
    of the batch mean)."""
    from opacus_helpers import opacus_grad_samples

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
    model = _gnq_model()
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
    model = _gnq_model()
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


# ---------------------------------------------------------------- local DP-SGD

CFG = TrainConfig(local_epochs=2, batch_size=8, optimizer="sgd", lr=0.05, momentum=0.9,
                  weight_decay=0.0, device="cpu")


def _client_data(n=37, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 5, 5, generator=g).numpy()
    y = torch.randint(0, 4, (n,), generator=g).numpy()
    return x, y


def _train_dp(seed, noise=1.0, clip=1.0, ids=None, cfg=CFG, gnq=GNQ_ABS):
    x, y = _client_data()
    model = _gnq_model().float()
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
    x, y = _client_data()
    start = {k: v.clone() for k, v in _gnq_model().float().state_dict().items()}
    lr, C, sigma, n = 0.05, 0.01, 1.0, 37
    cfg = dataclasses.replace(CFG, momentum=0.0, local_epochs=1, batch_size=n, lr=lr)
    updates = {}
    for noise in (0.0, sigma):
        model = _gnq_model().float()
        res = train_local(model, x, y, np.arange(n), cfg, seed=2, device=CPU, gnq=None,
                          dp={"noise_multiplier": noise, "clip_norm": C})
        assert res.dp_steps == 1 and res.dp_sample_rate == 1.0
        updates[noise] = torch.cat([(model.state_dict()[k] - start[k]).flatten() for k in start])
    assert updates[0.0].norm() <= lr * C * (1 + 1e-5)
    noise = (updates[sigma] - updates[0.0]).double()
    assert noise.std().item() == pytest.approx(lr * sigma * C / n, rel=0.15)


# ---------------------------------------------------------------- Flower strategy stack

BIG = {"w": torch.zeros(100, 60), "b": torch.zeros(60)}


class FakeGrid:
    def __init__(self, n):
        self.n = n

    def get_node_ids(self):
        return list(range(1, self.n + 1))


def _update(seed, norm):
    g = torch.Generator().manual_seed(seed)
    u = {k: torch.randn(v.shape, generator=g) for k, v in BIG.items()}
    scale = norm / math.sqrt(sum(float((t ** 2).sum()) for t in u.values()))
    return {k: (BIG[k] + scale * t) for k, t in u.items()}


def _reply(node, arrays, *, weight=True, extra=None):
    out = Message(content=RecordDict({"arrays": ArrayRecord(BIG), "config": ConfigRecord({})}),
                  dst_node_id=node, message_type=MessageType.TRAIN)
    metrics = {"num-examples": 10 + node, "train-loss": 0.5, "partition-id": node - 1}
    if weight:
        metrics["dp-weight"] = 1
    metrics.update(extra or {})
    return Message(content=RecordDict({"arrays": ArrayRecord(arrays),
                                       "metrics": MetricRecord(metrics)}), reply_to=out)


def _stack(kind, noise=1.0, clip=1.0, n=4, seed=0):
    from fedaudit.simulation.strategy_factory import make_strategy
    from strategies.auditing import AuditingStrategy

    scen = load_scenario("quickstart", [f"defense.kind={kind}", f"defense.noise_multiplier={noise}",
                                        f"defense.clip_norm={clip}", f"federation.num_clients={n}",
                                        f"scenario.seed={seed}"])
    from fedaudit.probes import ProbeRun
    from fedaudit.probes.update_gnq import UpdateGnq
    from fedaudit.probes.update_norm import UpdateNorm

    rounds = []
    run = ProbeRun(scen, Path("."))  # these probes keep rounds.jsonl keys only
    strat = AuditingStrategy(make_strategy(scen), on_round=lambda r, a, audit: rounds.append(audit),
                             probes=[UpdateNorm(run), UpdateGnq(run)])
    return strat, rounds


def _round(strat, norms, server_round=1, seeds=None):
    msgs = list(strat.configure_train(server_round, ArrayRecord(BIG), ConfigRecord({}),
                                      FakeGrid(len(norms))))
    assert len(msgs) == len(norms)
    seeds = seeds or list(range(len(norms)))
    updates = [_update(s, nm) for s, nm in zip(seeds, norms)]
    replies = [_reply(i + 1, u) for i, u in enumerate(updates)]
    arrays, _ = strat.aggregate_train(server_round, replies)
    return arrays, updates, replies, msgs


def _flat(d):
    return np.concatenate([np.asarray(d[k], dtype=np.float64).ravel() for k in BIG])


def _clipped_mean(updates, clip):
    rows = []
    for u in updates:
        v = _flat({k: u[k].numpy() for k in BIG})
        rows.append(v * min(1.0, clip / np.linalg.norm(v)))
    return np.mean(rows, axis=0)


def test_clip_bounds_every_update_and_aggregate_is_mean_of_clipped(identity):
    strat, rounds = _stack("clip", clip=1.0)
    norms = [0.3, 2.0, 5.0, 0.9]
    arrays, updates, replies, _ = _round(strat, norms)
    for r in replies:  # the wrapper replaced each reply's arrays by the clipped ones
        assert np.linalg.norm(_flat({k: r.content["arrays"][k].numpy() for k in BIG})) \
            <= 1.0 * (1 + 1e-5)
    agg = _flat({k: arrays[k].numpy() for k in BIG})
    np.testing.assert_allclose(agg, _clipped_mean(updates, 1.0), rtol=0, atol=1e-6)
    plain = np.mean([_flat({k: u[k].numpy() for k in BIG}) for u in updates], axis=0)
    assert np.linalg.norm(agg - plain) > 0.1  # the wrapper changed the aggregate
    # the auditing strategy recorded the updates as received (before clipping)
    (audit,) = rounds
    entries = audit.record.entries
    assert list(entries["update_norm"]) == [str(c.partition_id) for c in audit.clients]
    assert list(entries["update_norm"].values()) == pytest.approx(norms, rel=1e-5)
    assert len(entries["gnq_update"]) == len(norms)
    assert all(np.isfinite(v) for v in entries["gnq_update"].values())


def test_dp_server_noise_has_documented_std_and_is_seeded(identity):
    sigma, clip, n = 1.0, 1.0, 4
    norms = [0.5, 3.0, 1.5, 8.0]
    strat, _ = _stack("dp-server", noise=sigma, clip=clip, n=n)
    state = np.random.get_state()
    arrays, updates, _, _ = _round(strat, norms)
    after = np.random.get_state()
    assert all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
               for a, b in zip(state, after))  # the global numpy stream is left as it was
    noise = _flat({k: arrays[k].numpy() for k in BIG}) - _clipped_mean(updates, clip)
    std = sigma * clip / n  # Flower's compute_stdv: noise_multiplier * clip / sampled clients
    assert abs(noise.mean()) < 4 * std / math.sqrt(noise.size)
    assert noise.std() == pytest.approx(std, rel=0.05)

    again, _ = _stack("dp-server", noise=sigma, clip=clip, n=n)
    arrays2, *_ = _round(again, norms)
    other, _ = _stack("dp-server", noise=sigma, clip=clip, n=n, seed=1)
    arrays3, *_ = _round(other, norms)
    assert np.array_equal(_flat({k: arrays[k].numpy() for k in BIG}),
                          _flat({k: arrays2[k].numpy() for k in BIG}))
    assert not np.array_equal(_flat({k: arrays[k].numpy() for k in BIG}),
                              _flat({k: arrays3[k].numpy() for k in BIG}))


def test_dp_server_accountant_composes_one_release_per_round(identity):
    strat, rounds = _stack("dp-server", noise=1.3, n=3)
    for r in (1, 2, 3):
        arrays, *_ = _round(strat, [1.0, 2.0, 3.0], server_round=r, seeds=[r, r + 10, r + 20])
        assert arrays is not None
    spent = strat.strategy.privacy_spent()
    assert spent.num_releases == 3
    assert spent.epsilon == pytest.approx(gaussian_epsilon(1.3, 3, 1e-5), rel=1e-12)
    # a round missing a sampled client's reply releases nothing (Flower's strict mode)
    msgs = list(strat.configure_train(4, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(3)))
    arrays, _ = strat.aggregate_train(4, [_reply(1, _update(1, 1.0)), _reply(2, _update(2, 1.0))])
    assert arrays is None and rounds[-1].note and strat.strategy.privacy_spent().num_releases == 3


def test_dp_server_requires_uniform_weights(identity):
    strat, _ = _stack("dp-server", noise=1.0, n=2)
    list(strat.configure_train(1, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(2)))
    with pytest.raises(ValueError, match="equal client weights"):
        strat.aggregate_train(1, [_reply(1, _update(1, 1.0), weight=False, extra={"dp-weight": 2}),
                                  _reply(2, _update(2, 1.0))])


def test_dp_client_sends_clip_norm_and_adds_noise(identity):
    strat, _ = _stack("dp-client", noise=0.0, clip=0.7, n=3)
    msgs = list(strat.configure_train(1, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(3)))
    assert all(m.content["config"]["clipping_norm"] == 0.7 for m in msgs)
    # with noise 0 the client-side wrapper aggregates as sent (the clients clipped already)
    updates = [_update(s, 0.5) for s in range(3)]
    arrays, _ = strat.aggregate_train(1, [_reply(i + 1, u) for i, u in enumerate(updates)])
    np.testing.assert_allclose(_flat({k: arrays[k].numpy() for k in BIG}),
                               _clipped_mean(updates, 0.7), atol=1e-6)
    noisy, _ = _stack("dp-client", noise=2.0, clip=0.7, n=3)
    list(noisy.configure_train(1, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(3)))
    arrays, _ = noisy.aggregate_train(1, [_reply(i + 1, u) for i, u in enumerate(updates)])
    noise = _flat({k: arrays[k].numpy() for k in BIG}) - _clipped_mean(updates, 0.7)
    assert noise.std() == pytest.approx(2.0 * 0.7 / 3, rel=0.05)


def test_clip_when_asked_mod(identity):
    from strategies.defenses import clip_when_asked_mod

    def make_msg(config):
        return Message(content=RecordDict({"arrays": ArrayRecord(BIG),
                                           "config": ConfigRecord(config)}),
                       dst_node_id=1, message_type=MessageType.TRAIN)

    big_update = _update(0, 4.0)

    def app(msg, ctxt):  # a ClientApp that moves far and also returns an audit record
        return Message(content=RecordDict({"arrays": ArrayRecord(big_update),
                                           "metrics": MetricRecord({"num-examples": 3}),
                                           "audit": ConfigRecord({"gnq-ids": [1]})}),
                       reply_to=msg)

    ctx = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    out = clip_when_asked_mod(make_msg({"clipping_norm": 0.5, "server-round": 1}), ctx, app)
    assert not out.has_error()
    assert np.linalg.norm(_flat({k: out.content["arrays"][k].numpy() for k in BIG})) \
        == pytest.approx(0.5, rel=1e-5)
    assert out.content["audit"]["gnq-ids"] == [1]
    out = clip_when_asked_mod(make_msg({"server-round": 1}), ctx, app)  # no key: untouched
    assert np.linalg.norm(_flat({k: out.content["arrays"][k].numpy() for k in BIG})) \
        == pytest.approx(4.0, rel=1e-5)


def test_auditing_records_dp_steps_of_every_reply(identity):
    from strategies.auditing import AuditingStrategy
    from flwr.serverapp.strategy import FedAvg

    rounds = []
    strat = AuditingStrategy(FedAvg(fraction_evaluate=0.0), on_round=lambda r, a, au: rounds.append(au))
    strat._global = ArrayRecord(BIG)
    bad = {k: torch.full_like(v, float("nan")) for k, v in BIG.items()}
    dp = {"dp-steps": 12, "dp-sample-rate": 0.25}
    strat.aggregate_train(1, [_reply(1, _update(1, 1.0), extra=dp), _reply(2, bad, extra=dp),
                              _reply(3, _update(3, 1.0), extra={"dp-steps": 6,
                                                                "dp-sample-rate": 0.5})])
    (audit,) = rounds  # the rejected reply (partition 1) is accounted too: conservative
    assert audit.dp_steps == {0: 12, 1: 12, 2: 6}
    assert audit.dp_sample_rate == {0: 0.25, 1: 0.25, 2: 0.5}
    assert len(audit.failures) == 1


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


# ---------------------------------------------------------------- end to end (Flower + Ray)

TINY = ["federation.num_clients=3", "federation.rounds=2", "train.local_epochs=1",
        "canaries.count=0", "audit.quantization.quantizers=['fp32','int4']",
        "attack.methods=['loss','resmia']"]


@pytest.mark.e2e
def test_dpsgd_end_to_end_reports_epsilon_and_gnq(tmp_path):
    from fedaudit.compare import compare_rows
    from fedaudit.simulation.runner import run

    scen = load_scenario("quickstart", TINY + ["defense.kind=dp-sgd", "defense.noise_multiplier=1.5",
                                               "defense.clip_norm=2.0"])
    run_dir, res = run(scen, tmp_path)
    d = json.loads((run_dir / "results.json").read_text())["defense"]
    assert d["kind"] == "dp-sgd" and d["noise_multiplier"] == 1.5 and d["clip_norm"] == 2.0
    assert isinstance(d["epsilon"], float) and math.isfinite(d["epsilon"]) and d["epsilon"] > 0
    assert len(d["epsilon_per_client"]) == 3 and d["epsilon"] == max(d["epsilon_per_client"])
    lines = [json.loads(x) for x in (run_dir / "rounds.jsonl").read_text().splitlines()]
    for c in range(3):
        steps = sum(r["dp_steps"][str(c)] for r in lines)
        q = lines[0]["dp_sample_rate"][str(c)]
        assert steps == d["steps_per_client"][c]
        assert d["epsilon_per_client"][c] == pytest.approx(dpsgd_epsilon(1.5, q, steps, 1e-5))
        assert res["clients"][c]["dp"]["epsilon"] == d["epsilon_per_client"][c]
    assert d["accounting"] and "Poisson" in d["accounting"]
    with np.load(run_dir / "gnq_samples.npz") as g:  # client GNQ on clipped per-sample grads
        assert len(g["score"]) > 0 and np.all(np.isfinite(g["score"]))
    assert all(v is not None for r in lines for v in r["gnq_update"].values())
    (row,) = compare_rows([run_dir])
    assert row["defense"] == "dp-sgd" and row["epsilon"] == pytest.approx(d["epsilon"])


@pytest.mark.e2e
def test_dp_client_end_to_end_clips_on_the_clients(tmp_path):
    from fedaudit.simulation.runner import run

    scen = load_scenario("quickstart", TINY + ["defense.kind=dp-client",
                                               "defense.noise_multiplier=0.5",
                                               "defense.clip_norm=0.25"])
    run_dir, res = run(scen, tmp_path)
    d = res["defense"]
    assert d["releases"] == 2 and d["epsilon"] == pytest.approx(gaussian_epsilon(0.5, 2, 1e-5))
    assert d["flower_accountant"]["epsilon"] == pytest.approx(d["epsilon"])
    lines = [json.loads(x) for x in (run_dir / "rounds.jsonl").read_text().splitlines()]
    norms = [v for r in lines for v in r["update_norm"].values()]
    assert len(norms) == 6 and max(norms) <= 0.25 * (1 + 1e-4)  # clipped before sending
    assert all(r["failures"] == 0 and r["aggregated"] for r in lines)
    # GNQ keeps working: client-side (ghost auditor) and server-side on the clipped updates
    assert all(np.isfinite(v) for r in lines for v in r["gnq_update"].values())
    with np.load(run_dir / "gnq_samples.npz") as g:
        assert len(g["score"]) > 0 and np.all(np.isfinite(g["score"]))


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["dp-sgd", "dp-server"])
def test_defense_same_seed_same_numbers(tmp_path, kind):
    from fedaudit.simulation.runner import run

    scen = load_scenario("quickstart", TINY + [f"defense.kind={kind}"])
    _, a = run(scen, tmp_path / "a")
    _, b = run(scen, tmp_path / "b")
    assert result_numbers(a) == result_numbers(b)


@pytest.mark.slow
@pytest.mark.e2e
def test_defense_scenarios_none_vs_strong_dpsgd(tmp_path):
    from fedaudit.simulation.runner import run

    _, none = run(load_scenario("defense-none"), tmp_path)
    _, dp = run(load_scenario("defense-dpsgd", ["defense.noise_multiplier=4"]), tmp_path)
    assert none["attacks"]["loss"]["auc"] > 0.58
    assert dp["attacks"]["loss"]["auc"] < none["attacks"]["loss"]["auc"] - 0.05
    assert isinstance(dp["defense"]["epsilon"], float)


def test_client_gnq_rows_carry_their_local_epoch():
    """Without DP every sample is scored once per local epoch, tagged with that epoch."""
    x, y = _client_data()
    ids = np.arange(3, len(y))  # a client's share of the data
    cfg = dataclasses.replace(CFG, local_epochs=3)
    res = train_local(_gnq_model().float(), x, y, ids, cfg, seed=0, device=CPU, gnq=GNQ_ABS)
    assert len(res.gnq_ids) == 3 * len(ids)
    for epoch in (1, 2, 3):
        assert sorted(res.gnq_ids[res.gnq_epochs == epoch]) == sorted(ids)


def test_a_defense_is_one_registered_class():
    """The schema's defense.kind choices and the results' accounting come from the
    registry: a new kind needs no edit elsewhere."""
    from fedaudit.defenses import DEFENSES, Defense, register_defense

    @register_defense
    class Tight(Defense):
        kind = "test-tight-clip"
        uniform_weights = True
        wrapper = "server-fixed-clipping"

        def noise_multiplier(self, cfg):
            return 0.0

        def summary(self, cfg, rounds, *, num_clients, num_sampled):
            return {"epsilon": "inf", "accounting": "clipping at 0.1", "notes": []}

    try:
        scen = load_scenario("quickstart", ["defense.kind=test-tight-clip"])
        out = defense_summary(scen, [])
        assert out["kind"] == "test-tight-clip" and out["accounting"] == "clipping at 0.1"
        assert out["noise_multiplier"] == 0.0 and out["notes"] == []
        from fedaudit.simulation.strategy_factory import make_strategy
        from strategies.defenses import SeededServerSideFixedClipping

        assert isinstance(make_strategy(scen), SeededServerSideFixedClipping)
    finally:
        DEFENSES.unregister("test-tight-clip")
    with pytest.raises(ScenarioError, match="unknown choice; allowed: .*dp-sgd"):
        load_scenario("quickstart", ["defense.kind=test-tight-clip"])
