"""A deliberately broken DP-SGD in small in-process federations: the black-box audit flags a
hundredth of the noise with the warning, the white-box (gradient canary) audit a
quarter; honest noise stays below its claim."""

from __future__ import annotations

import numpy as np
import torch

from fedaudit.config import load_scenario
from fedaudit.data import build_federated_data


CPU = torch.device("cpu")


# ---------------------------------------------------------------- a broken DP-SGD step

#: one client (no FedAvg dilution), 2 rounds x 20 local epochs, lr 1: a setting where
#: noiseless clipped SGD memorises mislabeled canaries; at noise 10 the accountant claims
#: epsilon ~0.5 for it
RECIPE = ["audit.dp.canaries=200", "federation.num_clients=1", "federation.rounds=2",
          "train.local_epochs=20", "train.lr=1.0", "defense.noise_multiplier=10"]


def _broken_setup(name: str, recipe: list[str], noise_scale: float):
    """(scenario, data, defense, the DP-SGD options with the noise multiplied by
    ``noise_scale``, the initial global model) of an in-process DP-SGD federation."""
    from fedaudit.defenses import get_defense
    from fedaudit.models import model_for

    s = load_scenario(name, recipe)
    d = build_federated_data(s)
    defense = get_defense(s.defense.kind)
    dp = dict(defense.local_dp(s.defense))
    dp["noise_multiplier"] *= noise_scale  # the bug; the accounting below does not see it
    return s, d, defense, dp, model_for(s.model, d, seed=s.seed)


def _dpsgd_federation(noise_scale: float, tmp_path) -> dict:
    """Train the RECIPE in-process (FedAvg of train_local) with the DP-SGD noise multiplied
    by ``noise_scale``; account the CLAIMED noise with the dp-sgd defense; run the audit."""
    from fedaudit.audit.stages.dp_audit import add_dp_audit
    from fedaudit.models import model_for
    from fedaudit.training import client_seed, train_local

    s, d, defense, dp, g = _broken_setup("defense-dpsgd", RECIPE, noise_scale)
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


def test_broken_dpsgd_noise_is_flagged(one_thread, tmp_path):
    """Black box needs a gross bug (a hundredth of the noise) to see it; the white-box
    audit below catches a quarter."""
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


WHITE_BOX = ["data.dataset=digits", "data.max_samples=400", "federation.num_clients=2",
             "federation.rounds=1", "train.local_epochs=50", "train.batch_size=50",
             "audit.dp.canaries=1000", "defense.noise_multiplier=11"]


def _gradient_federation(noise_scale: float) -> dict:
    """One round of the WHITE_BOX recipe in-process: each client's DP-SGD (applied noise
    = told noise * ``noise_scale``) with its included canaries, the server's probe of the
    sent updates, the accountant told the configured noise, the audit summary."""
    from fedaudit.dp_audit.gradient import CanaryReader, canaries_for_model, update_scores
    from fedaudit.dp_audit.summary import audit_summary
    from fedaudit.models import model_for
    from fedaudit.training import client_seed, train_local

    s, d, defense, dp, g = _broken_setup("dp-audit", WHITE_BOX, noise_scale)
    can, layout = canaries_for_model(1000, g, 2, s.seed)
    probe = CanaryReader(can, layout)
    start = {k: v.detach().clone() for k, v in g.state_dict().items()}
    rows, steps, rates = [], {}, {}
    for c in range(2):
        m = model_for(s.model, d, seed=s.seed)
        m.load_state_dict(start)
        res = train_local(m, d.x, d.y, d.clients[c], s.train, seed=client_seed(0, 1, c),
                          device=CPU, dp=dp, dp_canaries=can.of_client(c))
        update = {k: (m.state_dict()[k] - start[k]).numpy() for k in layout.names}
        ids, values = probe(c, update)
        rows.append((ids, np.full(len(ids), c), values))
        steps[str(c)], rates[str(c)] = res.dp_steps, res.dp_sample_rate
    rounds = [tuple(np.concatenate(col) for col in zip(*rows))]
    claimed = defense.summary(s.defense, [{"dp_steps": steps, "dp_sample_rate": rates}],
                              num_clients=2, num_sampled=None)["epsilon"]
    summary, _ = audit_summary(update_scores(can, rounds), can.included, k_plus=250,
                               k_minus=250, delta=1e-5, beta=0.05, claimed_epsilon=claimed,
                               level="gradient", attack="update projection")
    return summary


def test_white_box_audit_catches_a_quarter_of_the_noise(one_thread):
    """The issue's broken run in small: the clients apply noise 2.75, the accountant is
    told 11 (epsilon ~1.97); the white-box bounds exceed the claim."""
    a = _gradient_federation(0.25)
    assert 1.5 < a["claimed_epsilon"] < 2.0
    # measured: 226 of 250 searched guesses right, mu >= 0.58 against the claimed 0.50,
    # epsilon >= 2.38 (Steinke 1.44 on 419 of 500 stays below); one guess is worth about
    # 0.011 in mu, so a CPU's rounding would have to flip 8 guesses to close the margin
    assert a["exceeds_claimed"] and "epsilon_lower_bound_gdp" in a["exceeded_by"]
    assert a["mu_lower_bound"] > a["claimed_mu"]


def test_white_box_audit_holds_for_honest_noise(one_thread):
    a = _gradient_federation(1.0)
    # measured: Steinke 0.17 (290 of 500), Gaussian DP 0.19 (155 of 250) <= 1.97
    assert a["epsilon_lower_bound"] <= a["claimed_epsilon"]
    assert a["epsilon_lower_bound_gdp"] <= a["claimed_epsilon"]
    assert not a["exceeds_claimed"]
