"""The one-run DP audit inside a run: [audit.dp] schema, the canaries planted in the data
(not in the attack sets), and a deliberately broken DP-SGD flagged by the warning."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.data import build_federated_data

CPU = torch.device("cpu")


def test_audit_dp_defaults_and_guess_counts():
    s = load_scenario("defense-none")
    assert s.audit.dp.canaries == 0 and s.audit.dp.beta == 0.05
    assert build_federated_data(s).dp_canaries is None
    s = load_scenario("defense-none", ["audit.dp.canaries=201"])
    assert s.audit.dp.guess_counts() == (50, 50)
    s = load_scenario("defense-none", ["audit.dp.canaries=200", "audit.dp.k_plus=30",
                                       "audit.dp.k_minus=0"])
    assert s.audit.dp.guess_counts() == (30, 0)
    assert s.sections()["audit.dp"] == {"canaries": 200, "k_plus": 30, "k_minus": 0,
                                        "beta": 0.05}


@pytest.mark.parametrize("overrides, fragment", [
    (["audit.dp.canaries=10", "audit.dp.k_plus=8", "audit.dp.k_minus=3"],
     "more guesses than audit.dp.canaries"),
    (["audit.dp.canaries=10", "audit.dp.k_plus=0", "audit.dp.k_minus=0"], "at least one guess"),
    (["audit.dp.canaries=10", "defense.kind=dp-server"], "has no DP audit; allowed: "),
    (["audit.dp.beta=0.0"], "audit.dp.beta"),
    (["audit.dp.canaries=-1"], "audit.dp.canaries"),
])
def test_audit_dp_errors(overrides, fragment):
    with pytest.raises(ScenarioError, match=fragment):
        load_scenario("defense-none", overrides)


def test_too_many_canaries_for_the_holdout():
    s = load_scenario("defense-none", ["audit.dp.canaries=251"])  # holdout: 500 samples
    with pytest.raises(ScenarioError, match=r"audit.dp.canaries = 251: .*allowed: 0..250"):
        build_federated_data(s)


def test_canaries_planted_in_clients_and_kept_out_of_attacks():
    from fedaudit.attack_sets import attack_sets

    plain = build_federated_data(load_scenario("defense-none"))
    s = load_scenario("defense-none", ["audit.dp.canaries=200"])
    d = build_federated_data(s)
    can = d.dp_canaries
    assert can.m == 200 and 70 < can.included.sum() < 130  # Binomial(200, 1/2): sd 7.1
    # from the holdout, removed from it; everything else unchanged
    assert np.isin(can.ids, plain.holdout).all() and not np.isin(can.ids, d.holdout).any()
    assert np.array_equal(np.sort(np.r_[d.holdout, can.ids]), plain.holdout)
    assert np.array_equal(d.test, plain.test)
    assert np.all(d.y[can.ids] != plain.y[can.ids]) and np.array_equal(d.y[can.ids], can.label)
    others = np.setdiff1d(np.arange(len(d.y)), can.ids)
    assert np.array_equal(d.y[others], plain.y[others])
    for c, ids in enumerate(d.clients):
        mine = can.ids[can.client == c]
        assert np.array_equal(np.sort(np.r_[plain.clients[c], mine]), ids)
    assert not np.isin(can.ids[~can.included], d.train).any()
    for st in attack_sets(s, d):
        assert not np.isin(can.ids, st["members"]).any()
        assert not np.isin(can.ids, st["nonmembers"]).any()
    # reproducible: the same draw from a fresh build
    from fedaudit.data.federated import _build_cached

    _build_cached.cache_clear()
    again = build_federated_data(s).dp_canaries
    assert np.array_equal(again.ids, can.ids) and np.array_equal(again.included, can.included)


# ---------------------------------------------------------------- a broken DP-SGD step

#: one client (no FedAvg dilution), 2 rounds x 20 local epochs, lr 1: a setting where
#: noiseless clipped SGD memorises mislabeled canaries; at noise 10 the accountant claims
#: epsilon ~0.5 for it
RECIPE = ["audit.dp.canaries=200", "federation.num_clients=1", "federation.rounds=2",
          "train.local_epochs=20", "train.lr=1.0", "defense.noise_multiplier=10"]


def _dpsgd_federation(noise_scale: float, tmp_path) -> dict:
    """Train the RECIPE in-process (FedAvg of train_local) with the DP-SGD noise multiplied
    by ``noise_scale``; account the CLAIMED noise with the dp-sgd defense; run the audit."""
    from fedaudit.defenses import get_defense
    from fedaudit.dp_audit_results import add_dp_audit
    from fedaudit.models import model_for
    from fedaudit.training import client_seed, train_local

    s = load_scenario("defense-dpsgd", RECIPE)
    d = build_federated_data(s)
    defense = get_defense(s.defense.kind)
    dp = dict(defense.local_dp(s.defense))
    dp["noise_multiplier"] *= noise_scale  # the bug; the accounting below does not see it
    g = model_for(s.model, d, seed=s.seed)
    state = {k: v.clone() for k, v in g.state_dict().items()}
    rounds = []
    for r in range(1, s.federation.rounds + 1):
        states, steps, rates = [], {}, {}
        for c in range(len(d.clients)):
            m = model_for(s.model, d, seed=s.seed)
            m.load_state_dict(state)
            res = train_local(m, d.x, d.y, d.clients[c], s.train, seed=client_seed(0, r, c),
                              device=CPU, dp=dp)
            states.append(m.state_dict())
            steps[str(c)], rates[str(c)] = res.dp_steps, res.dp_sample_rate
        state = {k: sum(st[k] for st in states) / len(states) for k in state}
        rounds.append({"dp_steps": steps, "dp_sample_rate": rates})
    claimed = defense.summary(s.defense, rounds, num_clients=len(d.clients), num_sampled=None)
    results = {"defense": claimed, "warnings": []}
    add_dp_audit(results, s, d, state, tmp_path, CPU)
    return results


@pytest.fixture()
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_broken_dpsgd_noise_is_flagged(one_thread, tmp_path):
    res = _dpsgd_federation(0.01, tmp_path)
    audit, eps = res["dp_audit"], res["defense"]["epsilon"]
    assert 0.3 < eps < 0.8  # the claim of noise 10 (about 0.51)
    # measured: 93 of 100 correct, bound 1.92; far above the claim on any CPU
    assert audit["epsilon_lower_bound"] > eps and audit["exceeds_claimed"]
    assert audit["claimed_epsilon"] == eps and audit["guesses"] == 100
    (w,) = res["warnings"]
    assert w["message"].startswith("DP AUDIT FAILED") and "exceeds the claimed epsilon" in \
        w["message"]
    with np.load(tmp_path / "dp_canaries.npz") as z:
        assert len(z["sample_id"]) == 200
        assert int((z["guess"] != 0).sum()) == 100
        assert set(np.unique(z["included"]).tolist()) == {0, 1}


def test_honest_dpsgd_stays_below_its_claim(one_thread, tmp_path):
    res = _dpsgd_federation(1.0, tmp_path)
    audit = res["dp_audit"]
    # measured: 56 of 100 correct, bound 0 <= 0.51
    assert audit["epsilon_lower_bound"] <= res["defense"]["epsilon"]
    assert not audit["exceeds_claimed"] and res["warnings"] == []


@pytest.mark.e2e
def test_dp_audit_end_to_end(tmp_path):
    """Through Flower + Ray: results.json dp_audit, dp_canaries.npz, no canary scored by
    the membership attacks, the report's card."""
    from fedaudit.simulation.runner import run

    scen = load_scenario("defense-none", ["audit.dp.canaries=40", "federation.rounds=2",
                                          "train.local_epochs=2",
                                          "audit.quantization.enabled=false",
                                          "attack.methods=['loss']"])
    run_dir, res = run(scen, tmp_path)
    a = json.loads((run_dir / "results.json").read_text())["dp_audit"]
    assert a["canaries"] == 40 and a["guesses"] == 20 and a["claimed_epsilon"] is None
    with np.load(run_dir / "dp_canaries.npz") as z, np.load(run_dir / "scores.npz") as sc:
        assert not np.isin(z["sample_id"], sc["sample_id"]).any()
    from fedaudit.report import write_report

    html = write_report(run_dir).read_text()
    assert "empirical lower bound" in html
