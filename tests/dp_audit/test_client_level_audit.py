"""The client-level DP audit: canary clients in the strategy stack's aggregate, their
scores; LiRA's canary score; compare and the report show both epsilons."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from fedaudit.config import load_scenario
from fedaudit.data import build_federated_data


CPU = torch.device("cpu")


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
    from tests.helpers.fake_runs import write_fake_run

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
