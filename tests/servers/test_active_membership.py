"""The gradient-ascent server (Nasr et al. 2019's active membership attack): its ascent step
against the hand-computed gradient of a linear softmax model in float64, its targets, the
round it modifies, the auditing strategy sending what it modifies, the stage's one-line
refusals and the threat-matrix cell from explicit results."""

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord

from fedaudit.config import load_scenario
from fedaudit.errors import ScenarioError
from fedaudit.rundir.threat_matrix import MEASURED, NOT_MEASURED, threat_matrix
from fedaudit.servers import server_of
from fedaudit.servers.active_membership import GradientAscentServer, ascend, targets_of


def _softmax_gradient(w, b, x, y):
    """The mean cross-entropy's gradient of a linear softmax model, by hand."""
    z = x @ w.T + b
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    d = (p - np.eye(w.shape[0])[y]) / len(x)
    return d.T @ x, d.sum(axis=0)


def test_one_ascent_step_adds_the_gradient_of_the_targets_mean_loss():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3)).double()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    x, y = rng.random((5, 1, 2, 2)), rng.integers(0, 3, 5)
    out = ascend(model, state, x, y, ascent=0.5, steps=1)
    gw, gb = _softmax_gradient(state["1.weight"].numpy(), state["1.bias"].numpy(),
                               x.reshape(5, -1), y)
    # float64 on both sides: a few rounded sums apart, far below 1e-12
    np.testing.assert_allclose(out["1.weight"].numpy(), state["1.weight"].numpy() + 0.5 * gw,
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out["1.bias"].numpy(), state["1.bias"].numpy() + 0.5 * gb,
                               rtol=1e-12, atol=1e-15)
    loss = torch.nn.functional.cross_entropy
    model.load_state_dict(state)
    with torch.no_grad():
        before = float(loss(model(torch.as_tensor(x)), torch.as_tensor(y)))
        model.load_state_dict(out)
        assert float(loss(model(torch.as_tensor(x)), torch.as_tensor(y))) > before


def test_the_targets_are_members_and_holdout_samples_drawn_with_the_seed():
    from fedaudit.data import build_federated_data

    s = load_scenario("quickstart", ["active_membership.enabled=true", "federation.rounds=2",
                                     "active_membership.targets=10"])
    data = build_federated_data(s)
    ids, member = targets_of(s.stages["active_membership"], data)
    assert len(ids) == 20 and member.tolist() == [True] * 10 + [False] * 10
    assert set(ids[member]) <= set(data.train.tolist())
    assert set(ids[~member]) <= set(data.holdout.tolist())
    again, _ = targets_of(s.stages["active_membership"], data)
    np.testing.assert_array_equal(ids, again)


def test_the_server_modifies_only_its_round_and_the_strategy_sends_it():
    from fedaudit.data import build_federated_data
    from fedaudit.models import model_for
    from strategies.auditing import AuditingStrategy

    s = load_scenario("quickstart", ["active_membership.enabled=true", "federation.rounds=3",
                                     "active_membership.round=3"])
    server = server_of(s)
    assert isinstance(server, GradientAscentServer) and server.modifies_rounds()
    data = build_federated_data(s)
    state = model_for(s.model, data, seed=0).state_dict()
    assert server.modify(2, dict(state), s, data) is None
    sent = server.modify(3, dict(state), s, data)
    assert any(not torch.equal(sent[k], state[k]) for k in state)

    class Inner:
        def configure_train(self, rnd, arrays, config, grid):
            self.got = (rnd, arrays)
            return []

    inner = Inner()
    marked = ArrayRecord({"w": torch.ones(2)})
    strategy = AuditingStrategy(inner, on_round=lambda *a: None,
                                modify=lambda rnd, arrays: marked if rnd == 3 else arrays)
    plain = ArrayRecord({"w": torch.zeros(2)})
    strategy.configure_train(2, plain, ConfigRecord(), None)
    assert inner.got == (2, plain) and strategy._global is plain
    strategy.configure_train(3, plain, ConfigRecord(), None)
    assert inner.got == (3, marked) and strategy._global is marked  # what the probes see


@pytest.mark.parametrize("overrides, message", [
    (["federation.rounds=2", "active_membership.round=3"],
     "active_membership.round = 3: round 3 does not exist; allowed: 2..2"),
    (["federation.rounds=2", "imprint.enabled=true"],
     "the malicious servers imprint, gradient-ascent are all switched on"),
])
def test_bad_active_tables_are_refused_in_one_line(overrides, message):
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenario("quickstart", ["active_membership.enabled=true", *overrides])
    assert "\n" not in str(err.value)


def test_the_malicious_server_s_membership_cell():
    results = {"scenario": {"federation": {"aggregation": "secagg+"}},
               "active_membership": {"round": 3, "active": {"auc": 0.674,
                                                            "auc_ci": [0.577, 0.770],
                                                            "verdict": {"auc": "above chance"}},
                                     "passive": {"auc": 0.63}}}
    cell = threat_matrix(results)["malicious server"]["membership"]
    # a run made before the four outcomes: above chance read as a leak
    assert cell.status == MEASURED and cell.figure == 0.674 and cell.verdict == "leaks"
    assert cell.text == "AUC 0.674 [0.577, 0.770] (gradient ascent, round 3); passive 0.630"
    assert threat_matrix({})["malicious server"]["membership"].status == NOT_MEASURED


def test_the_active_attack_is_compared_with_the_honest_same_round_paired():
    """The cell prefers the paired comparison with the honest server's same round, and
    says what the gain's verdict means."""
    gain = {"auc_gain": 0.014, "auc_gain_ci": [-0.02, 0.048], "verdict": "no leak beyond delta",
            "verdict_detail": {"summary": "no leak beyond delta 0.05"}}
    results = {"active_membership": {
        "round": 10, "active": {"auc": 0.561, "auc_ci": [0.51, 0.61]},
        "verdict_detail": {"outcome": "leaks", "summary": "leaks, p = 0.01"},
        "paired": {"honest_same_round": gain,
                   "previous_round": {**gain, "auc_gain": 0.5}}}}
    cell = threat_matrix(results)["malicious server"]["membership"]
    assert cell.verdict == "leaks" and cell.detail["summary"] == "leaks, p = 0.01"
    assert cell.text.endswith("over the honest server's round 10 (paired): +0.014 [-0.020, "
                              "+0.048], adds at most 0.05")


def test_paired_delong_against_its_definition():
    """DeLong's paired variance from the O(m n) placements of two correlated scores, and
    an attack compared with itself: a zero difference with a zero variance."""
    from fedaudit.verdicts.paired import paired_auc_difference

    g = np.random.default_rng(3)
    members = np.repeat([1, 0], [30, 40])
    a = g.normal(size=70) + 0.8 * members
    b = a + g.normal(scale=0.7, size=70)

    def placements(s):
        x, y = s[members == 1], s[members == 0]
        psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
        return psi.mean(axis=1), psi.mean(axis=0)

    (a10, a01), (b10, b01) = placements(a), placements(b)
    var = (np.var(a10 - b10, ddof=1) / 30 + np.var(a01 - b01, ddof=1) / 40)
    est = paired_auc_difference(a, b, members)
    # the variance of a difference equals the paired formula's: float64 on O(1) values
    assert est.figure == pytest.approx(a10.mean() - b10.mean(), abs=1e-14)
    half = 1.959963984540054 * np.sqrt(var)
    assert est.interval == pytest.approx((est.figure - half, est.figure + half), abs=1e-12)
    same = paired_auc_difference(a, a, members)
    assert same.figure == 0.0 and same.interval == (0.0, 0.0) and same.p_above == 1.0
