"""The one-run DP audit inside a run: [audit.dp] schema, the canaries planted in the data
(not in the attack sets), and a deliberately broken DP-SGD flagged by the warning."""

from __future__ import annotations

import json
import math

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
    # level "auto" is resolved to the defense's, so the clients rebuild the same data
    assert s.sections()["audit.dp"] == {"canaries": 200, "level": "sample", "k_plus": 30,
                                        "k_minus": 0, "beta": 0.05}


@pytest.mark.parametrize("overrides, fragment", [
    (["audit.dp.canaries=10", "audit.dp.k_plus=8", "audit.dp.k_minus=3"],
     "more guesses than audit.dp.canaries"),
    (["audit.dp.canaries=10", "audit.dp.k_plus=0", "audit.dp.k_minus=0"], "at least one guess"),
    (["audit.dp.canaries=10", "audit.dp.level='client'"],
     "audited at the sample level; allowed: 'auto', 'sample'"),
    (["audit.dp.level='bogus'"], "unknown choice"),
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
    from fedaudit.audit.sets import attack_sets

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
        assert not np.isin(can.ids, st.members).any()
        assert not np.isin(can.ids, st.nonmembers).any()
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


@pytest.mark.e2e
@pytest.mark.parametrize("name, level", [("defense-none", "sample"),
                                         ("defense-dpserver", "client")])
def test_dp_audit_end_to_end(tmp_path, name, level):
    """Through Flower + Ray: results.json dp_audit, dp_canaries.npz, no canary scored by
    the membership attacks, the report's card."""
    from fedaudit.simulation.runner import run

    scen = load_scenario(name, ["audit.dp.canaries=40", "federation.rounds=2",
                                "train.local_epochs=2", "audit.quantization.enabled=false",
                                "attack.methods=['loss']"])
    run_dir, res = run(scen, tmp_path)
    a = json.loads((run_dir / "results.json").read_text())["dp_audit"]
    assert a["canaries"] == 40 and a["guesses"] == 20 and a["level"] == level
    assert a["claimed_epsilon"] == res["defense"]["epsilon"]
    with np.load(run_dir / "dp_canaries.npz") as z:
        assert len(z["score"]) == 40 and int((z["guess"] != 0).sum()) == 20
        if level == "sample":
            with np.load(run_dir / "scores.npz") as sc:
                assert not np.isin(z["sample_id"], sc["sample_id"]).any()
        else:  # the recorder saw only the real clients
            assert all(set(r["update_norm"]) <= {"0", "1", "2", "3", "4"}
                       for r in map(json.loads,
                                    (run_dir / "rounds.jsonl").read_text().splitlines()))
    from fedaudit.report import write_report

    html = write_report(run_dir).read_text()
    assert "empirical lower bound" in html


#: the white-box counterpart: 2 clients of 100, batch 50 (Poisson rate 1/2), 50 local
#: epochs = 100 DP-SGD steps each in one round, 1,000 gradient canaries; told noise 11:
#: the accountant claims epsilon ~1.97 (the dp-audit scenario's broken run in small)
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


@pytest.mark.e2e
def test_gradient_dp_audit_end_to_end(tmp_path):
    """audit.dp.level = "gradient" through Flower + Ray: the auditing strategy records the
    sent updates at the canary coordinates each round, the audit scores them and the
    global model; without noise the included canaries stand out."""
    from fedaudit.dp_audit.gradient import canaries_for_model
    from fedaudit.models import model_for
    from fedaudit.rundir.layout import dp_gradient_round_path
    from fedaudit.simulation.runner import run

    scen = load_scenario("dp-audit", ["data.dataset=digits", "data.max_samples=600",
                                      "federation.num_clients=3", "federation.rounds=2",
                                      "train.local_epochs=2", "train.batch_size=50",
                                      "audit.dp.canaries=60", "defense.noise_multiplier=0"])
    run_dir, res = run(scen, tmp_path)
    a = json.loads((run_dir / "results.json").read_text())["dp_audit"]
    assert a["level"] == "gradient" and a["canaries"] == 60 and a["guesses"] == 30
    assert a["claimed_epsilon"] == "inf" == res["defense"]["epsilon"]
    assert a["global"]["canaries"] == 60 and "view" in a["global"]
    d = build_federated_data(scen)
    can, _ = canaries_for_model(60, model_for(scen.model, d, seed=scen.seed), 3, scen.seed)
    for r in (1, 2):  # every client's value at every canary coordinate, each round
        with np.load(dp_gradient_round_path(run_dir, r)) as z:
            assert sorted(set(z["client"].tolist())) == [0, 1, 2]
            assert len(z["value"]) == 3 * 60 and np.isfinite(z["value"]).all()
    with np.load(run_dir / "dp_canaries.npz") as z:
        assert np.array_equal(z["coordinate"], can.coord)
        assert np.array_equal(z["included"].astype(bool), can.included)
        # no noise: a drawn canary moves its coordinate by lr * clip / (q n) per draw,
        # far beyond the real gradients' difference between clients at that coordinate
        assert a["correct"] >= 0.9 * a["guesses"]
        assert a["epsilon_lower_bound"] > 0 and a["mu_lower_bound"] > 0


# ---------------------------------------------------------------- client level

def _client_round(kind: str, noise: float, n: int = 3, m: int = 12, seed: int = 0):
    """One round of the scenario's strategy stack with the client-level audit on: ``n``
    real clients whose updates have norm 0.1 (below the clipping norm 0.5)."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

    from fedaudit.simulation.strategy_factory import make_strategy
    from strategies.canary_clients import CanaryClientsStrategy

    scen = load_scenario("quickstart", [f"defense.kind={kind}", f"defense.clip_norm=0.5",
                                        f"federation.num_clients={n}",
                                        f"audit.dp.canaries={m}", f"scenario.seed={seed}"]
                         + ([f"defense.noise_multiplier={noise}"] if kind != "clip" else []))
    strat = make_strategy(scen)
    assert isinstance(strat, CanaryClientsStrategy)
    glob = {"w": torch.linspace(-1, 1, 300).reshape(20, 15), "b": torch.zeros(15)}

    class Grid:
        def get_node_ids(self):
            return list(range(1, n + 1))

    msgs = list(strat.configure_train(1, ArrayRecord(glob), ConfigRecord({}), Grid()))
    assert len(msgs) == n  # the canaries are not sampled nodes
    replies, updates = [], []
    for i in range(n):
        g = torch.Generator().manual_seed(100 + i)
        u = {k: torch.randn(glob[k].shape, generator=g) for k in ("w", "b")}
        scale = 0.1 / math.sqrt(sum(float((t ** 2).sum()) for t in u.values()))
        sent = {**glob, **{k: glob[k] + scale * u[k] for k in u}}
        updates.append(np.r_[(sent["w"] - glob["w"]).numpy().ravel(),
                             (sent["b"] - glob["b"]).numpy().ravel()].astype(np.float64))
        out = Message(content=RecordDict({"config": ConfigRecord({})}), dst_node_id=i + 1,
                      message_type=MessageType.TRAIN)
        metrics = MetricRecord({"num-examples": 10, "train-loss": 0.5, "partition-id": i,
                                "dp-weight": 1})
        replies.append(Message(content=RecordDict({"arrays": ArrayRecord(sent),
                                                   "metrics": metrics}), reply_to=out))
    arrays, _ = strat.aggregate_train(1, replies)
    return scen, strat, glob, arrays, updates


def test_canary_clients_join_the_aggregate_at_the_clipping_norm(identity):
    from fedaudit.dp_audit.canaries import canary_direction, client_inclusion

    scen, strat, glob, arrays, updates = _client_round("clip", 0.0)
    included = client_inclusion(12, 0)
    k = int(included.sum())
    assert 0 < k < 12 and list(strat.included) == list(np.flatnonzero(included))
    # no noise: the uniform mean of the 3 real updates and k canary updates 0.5 * u_j
    want = (sum(updates) + sum(0.5 * canary_direction(0, j, 315)
                               for j in np.flatnonzero(included))) / (3 + k)
    got = np.r_[arrays["w"].numpy().ravel(), arrays["b"].numpy().ravel()].astype(np.float64)
    base = np.r_[glob["w"].numpy().ravel(), glob["b"].numpy().ravel()].astype(np.float64)
    # float32 storage of the models: |error| <= a few ulp of |w| <= 1, i.e. ~1e-7
    assert np.allclose(got - base, want, rtol=0, atol=1e-6)
    # every canary direction is unit length at the clipping norm
    assert np.linalg.norm(canary_direction(0, 3, 315)) == pytest.approx(1.0, abs=1e-12)


def test_canary_clients_under_central_dp_release_a_noised_aggregate(identity):
    scen, strat, glob, arrays, _ = _client_round("dp-server", 1.0)
    assert arrays is not None  # strict mode: the reply count includes the canaries
    assert strat.privacy_spent().num_releases == 1  # delegated to the DP wrapper


def test_client_level_scores_separate_included_canaries_without_noise(identity):
    """The auditor's score <w_T - w_0, u_j> on a model that moved by exactly the
    included canaries' mean update: every included canary scores about clip/(n+k)."""
    from fedaudit.dp_audit.canaries import client_inclusion, direction_scores

    scen, strat, glob, arrays, _ = _client_round("clip", 0.0)
    change = np.r_[(arrays["w"].numpy() - glob["w"].numpy()).ravel(),
                   (arrays["b"].numpy() - glob["b"].numpy()).ravel()].astype(np.float64)
    scores = direction_scores(change, 0, 12)
    inc = client_inclusion(12, 0)
    assert scores[inc].min() > scores[~inc].max()


# ---------------------------------------------------------------- compare and report

def test_compare_and_report_show_both_epsilons(tmp_path):
    from test_compare import write_fake_run

    from fedaudit.compare import columns, compare_rows, to_csv
    from fedaudit.report.sections import dp_audit_card

    audit = {"level": "sample", "attack": "loss", "canaries": 200, "included": 97,
             "k_plus": 50, "k_minus": 50, "guesses": 100, "correct": 93, "beta": 0.05,
             "delta": 1e-5, "epsilon_lower_bound": 1.9224, "claimed_epsilon": 0.51,
             "exceeds_claimed": True}
    run = write_fake_run(tmp_path / "a-20250101-120000", defense="dp-sgd", epsilon=0.51)
    res = json.loads((run / "results.json").read_text())
    res["dp_audit"] = audit
    (run / "results.json").write_text(json.dumps(res))
    plain = write_fake_run(tmp_path / "b-20250101-120000", defense="dp-sgd", epsilon=2.0)
    rows = compare_rows([run, plain])
    assert rows[0]["epsilon"] == 0.51 and rows[0]["epsilon_lb"] == 1.9224
    assert rows[1]["epsilon_lb"] is None  # a run without the audit: empty cell
    cols = columns(rows)
    assert cols[cols.index("epsilon") + 1] == "epsilon_lb"
    assert "epsilon,epsilon_lb" in to_csv(rows).splitlines()[0]
    key, value, sub = dp_audit_card(audit)
    assert key == "empirical lower bound vs claimed epsilon"
    assert value == "1.922 vs 0.51" and "93 of 100" in sub and "EXCEEDS" in sub
    _, value, sub = dp_audit_card({**audit, "claimed_epsilon": None, "exceeds_claimed": False})
    assert value == "1.922 vs –" and "no epsilon claimed" in sub


def test_a_defense_without_an_audit_level_is_refused():
    from fedaudit.defenses import DEFENSES, Defense, register_defense

    @register_defense
    class Opaque(Defense):
        kind = "test-opaque"

        def summary(self, cfg, rounds, *, num_clients, num_sampled):
            return {"epsilon": None, "accounting": "", "notes": []}

    try:
        assert load_scenario("quickstart", ["defense.kind=test-opaque"]).audit.dp.level == "auto"
        with pytest.raises(ScenarioError, match="'test-opaque' has no DP audit; allowed: "):
            load_scenario("quickstart", ["defense.kind=test-opaque", "audit.dp.canaries=8"])
    finally:
        DEFENSES.unregister("test-opaque")


def test_lira_canary_score_is_offline_lira_against_the_references():
    """LiRA's statistic of the canaries, recomputed here from the models' logits:
    phi = log p_y - log sum_{y' != y} p_y', offline test log Phi((phi - mu) / s) with mu and
    s the references' per-canary mean and the pooled deviation (fixed_variance)."""
    from scipy.stats import norm

    from fedaudit.audit.stages.dp_audit import lira_canary_scores
    from fedaudit.models import model_for

    s = load_scenario("defense-none", ["audit.dp.canaries=40"])
    d = build_federated_data(s)
    ids = d.dp_canaries.ids
    states = [model_for(s.model, d, seed=k).state_dict() for k in range(4)]
    got = lira_canary_scores(s, d, states[0], states[1:], CPU)

    def phi(state):
        m = model_for(s.model, d, seed=0)
        m.load_state_dict(state)
        with torch.no_grad():
            logp = torch.log_softmax(m(torch.from_numpy(d.x[ids])).double(), dim=1).numpy()
        y = d.y[ids]
        own = logp[np.arange(len(y)), y]
        others = np.log(np.exp(logp).sum(axis=1) - np.exp(own))
        return own - others

    ref = np.stack([phi(st) for st in states[1:]])
    mu = ref.mean(axis=0)
    sd = np.sqrt(((ref - mu) ** 2).sum() / ref.size)
    want = norm.logcdf(phi(states[0]), loc=mu, scale=sd)
    # float32 logits of random-init models: phi agrees to ~1e-6 (the library floors each
    # probability at its EPS, far below these untrained models' probabilities)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_audit_scenarios_claim_what_one_run_can_reach():
    """The bundled audit scenarios claim about 6.2-6.35 (issue 31 asks 2-8): with m
    canaries all guessed right Steinke's bound cannot exceed about log m (6.9 at 1,000)."""
    from fedaudit.defenses.accounting import gaussian_epsilon, rdp_epsilon

    s = load_scenario("dp-audit")
    assert (s.audit.dp.canaries, s.audit.dp.level) == (1000, "gradient")
    n = 4000 // 2 // s.federation.num_clients  # half the samples train: 200 per client
    q, steps = 1 / math.ceil(n / s.train.batch_size), s.federation.rounds * s.train.local_epochs \
        * math.ceil(n / s.train.batch_size)
    assert (q, steps) == (0.5, 100)
    claim = rdp_epsilon(s.defense.options["noise_multiplier"], q, steps, 1e-5)
    assert 6.3 < claim < 6.4  # the 6.35 of docs/validation.md section 10
    c = load_scenario("dp-audit-client")
    assert (c.defense.kind, c.audit.dp.canaries) == ("dp-server", 1000)
    claim = gaussian_epsilon(c.defense.options["noise_multiplier"], c.federation.rounds, 1e-5)
    assert 6.1 < claim < 6.3  # 6.21: comparable with dp-audit's
    assert c.data == s.data and c.model == s.model
