"""The attacker's positions (fedaudit/audit/targets/, fedaudit/audit/stages/positions.py): FedMIA against a hand-computed case,
which client models the server keeps, round selection (a run with the clients and rounds
targets: e2e/test_positions_run.py)."""

import math

import numpy as np
import pytest
import torch

from attacks.membership import evaluate_attacks
from attacks.membership.reference_signals import ReferenceSignals
from fedaudit.audit.stages.positions import Evidence, attack_positions, membership_verdict
from fedaudit.audit.targets.base import selected_rounds as _selected
from fedaudit.config import load_scenario
from fedaudit.metrics import MembershipMetrics
from fedaudit.probes import ProbeRun, Reply, RoundRecord, RoundView
from fedaudit.probes.client_models import ClientModels
from fedaudit.rundir.client_models import client_model_rounds

from tests.helpers.oracles import FixedOracle

TOL = dict(rtol=1e-12, atol=1e-12)  # float64 on O(1) values


def _phi_probs(phi):
    """Two-class probabilities whose LiRA statistic log(p0 / p1) is ``phi`` (label 0)."""
    p0 = 1.0 / (1.0 + math.exp(-phi))
    return [p0, 1.0 - p0]


def test_fedmia_hand_computed_three_out_models_two_samples():
    # the other clients' models: statistics {0, 1, 2} on sample 0 (mean 1, std sqrt(2/3)),
    # {1, 1, 4} on sample 1 (mean 2, std sqrt(2)); the client's model: 2 and 1
    others = np.array([[_phi_probs(0.0), _phi_probs(1.0)],
                       [_phi_probs(1.0), _phi_probs(1.0)],
                       [_phi_probs(2.0), _phi_probs(4.0)]])
    signals = ReferenceSignals(others, None, np.zeros(0), np.zeros(0, dtype=int),
                               np.zeros((3, 0, 2)))
    target = np.array([_phi_probs(2.0), _phi_probs(1.0)])
    out = evaluate_attacks(FixedOracle(target), np.array([0, 1]), np.array([0, 0]),
                           np.array([1, 0]), ["fedmia"], references=signals)

    def log_cdf(z):
        return math.log(0.5 * (1 + math.erf(z / math.sqrt(2))))

    # float64 round trip of phi through the logistic: relative error ~1e-15
    np.testing.assert_allclose(out["fedmia"].scores,
                               [log_cdf(1 / math.sqrt(2 / 3)), log_cdf(-1 / math.sqrt(2))],
                               rtol=1e-9, atol=1e-9)
    assert out["fedmia"].scores[0] > out["fedmia"].scores[1]


def test_round_selection():
    assert _selected([2, 5, 7], "last") == [7]
    assert _selected([2, 5, 7], "all") == [2, 5, 7]
    assert _selected([2, 5, 7], (5, 6)) == [5]
    assert _selected([], "last") == []


def _state(v):
    return {"w": torch.full((2,), float(v))}


def save_client_models(run_dir, round_, states, policy):
    """The client-models probe of a scenario with ``attack.rounds = policy``, ending a round
    in which the clients of ``states`` (client -> state) replied."""
    rounds = f'"{policy}"' if isinstance(policy, str) else str(list(policy))
    run = ProbeRun(load_scenario("quickstart", [f"attack.rounds={rounds}"]), run_dir)
    start = {"w": np.zeros(2, np.float32)}
    replies = tuple(Reply(round_, c, 10, 0.5, {k: v.numpy() for k, v in st.items()}, start)
                    for c, st in sorted(states.items()))
    ClientModels(run).on_round(RoundView(round_, replies, None), RoundRecord(run_dir, round_))


def test_server_keeps_only_the_rounds_last_can_still_ask_for(tmp_path):
    # round 1: clients 0,1,2; round 2: 0,1; round 3: 1,2
    save_client_models(tmp_path, 1, {0: _state(1), 1: _state(1), 2: _state(1)}, "last")
    save_client_models(tmp_path, 2, {0: _state(2), 1: _state(2)}, "last")
    assert client_model_rounds(tmp_path) == {1: [0, 1, 2], 2: [0, 1]}  # client 2's last: 1
    save_client_models(tmp_path, 3, {1: _state(3), 2: _state(3)}, "last")
    # round 1: every client trained again -> gone; round 2 is still client 0's last
    assert client_model_rounds(tmp_path) == {2: [0, 1], 3: [1, 2]}


def test_server_keeps_listed_rounds_or_all(tmp_path):
    for r in (1, 2, 3):
        save_client_models(tmp_path / "list", r, {0: _state(r), 1: _state(r)}, (2,))
        save_client_models(tmp_path / "all", r, {0: _state(r)}, "all")
    assert client_model_rounds(tmp_path / "list") == {2: [0, 1]}
    assert client_model_rounds(tmp_path / "all") == {1: [0], 2: [0], 3: [0]}


def _m(auc, tpr=0.0):
    return MembershipMetrics(auc, tpr, 0.0, 1.0, 0.01)


def test_attack_positions_pick_each_positions_best_method():
    outsider = Evidence({"loss": _m(0.6, 0.01), "entropy": _m(0.62, 0.0), "rmia": None})
    rounds = [(1, Evidence({"loss": _m(0.75, 0.2)})), (2, Evidence({"loss": _m(0.7, 0.1)})),
              (3, Evidence({"loss": None}))]
    server = Evidence({"loss": _m(0.65), "fedmia": _m(0.8)})
    rows = {r["position"]: r for r in attack_positions(outsider, rounds, server)}
    assert (rows["outsider"]["best_method"], rows["outsider"]["auc"]) == ("entropy", 0.62)
    assert rows["outsider"]["target"] == "final global model"
    # the insider has no labels to pick a round with: its figure is the last round it could
    # score; the best round (picked with the labels) is only its named upper bound
    assert (rows["insider"]["round"], rows["insider"]["auc"]) == (2, 0.7)
    bound = rows["insider"]["best_round_upper_bound"]
    assert (bound["round"], bound["best_method"], bound["auc"], bound["tpr_at_1pct_fpr"]) == \
        (1, "loss", 0.75, 0.2)
    assert "upper bound" in bound["note"]
    assert (rows["curious server"]["best_method"], rows["curious server"]["auc"]) == \
        ("fedmia", 0.8)
    # ties: the first method listed; a position with nothing attacked has no row
    tied = attack_positions(Evidence({"loss": _m(0.6), "confidence": _m(0.6)}), [], None)
    assert [(r["position"], r["best_method"]) for r in tied] == [("outsider", "loss")]
    assert attack_positions(None, [], Evidence({})) == []


def test_fedmia_only_for_the_server_view():
    from fedaudit.config import load_scenario
    from fedaudit.audit.targets.base import model_methods
    from fedaudit.audit.reference_models import uses_references

    s = load_scenario("quickstart", ["attack.methods=['loss','fedmia']",
                                     "attack.targets=['global','clients']"])
    assert model_methods(s) == ("loss",) and not uses_references(s)


@pytest.mark.parametrize("value, fragment", [
    ("attack.rounds=[0]", "round numbers >= 1"),
    ("attack.rounds=[9]", "round 9 does not exist"),
    ("attack.rounds=first", "'last', 'all' or a list"),
    ("attack.targets=['server']", "'server'; allowed: clients, global, quantized, rounds"),
    ("attack.methods=['loss','fedmia']", "add 'clients' to attack.targets"),
    # the reference attacks run on the released models only: listed with neither, they
    # would run on nothing
    ("attack.targets=['rounds','clients']\nattack.methods=['loss','lira']",
     "attack.methods lists lira, which no target in attack.targets = ['rounds', 'clients'] "
     "runs (rounds: loss; clients: loss)"),
])
def test_round_and_target_errors(value, fragment):
    from fedaudit.config import load_scenario
    from fedaudit.errors import ScenarioError

    with pytest.raises(ScenarioError) as exc:
        load_scenario("quickstart", value.split("\n"))
    assert fragment in str(exc.value)


def test_fedmia_alone_cannot_attack_a_released_model():
    from fedaudit.config import load_scenario
    from fedaudit.errors import ScenarioError

    with pytest.raises(ScenarioError, match="needs an attack on a released model"):
        load_scenario("quickstart", ["attack.methods=['fedmia']",
                                     "attack.targets=['global','clients']"])
    s = load_scenario("quickstart", ["attack.methods=['fedmia']", "attack.targets=['clients']"])
    assert s.attack.methods == ("fedmia",)


def test_resuming_drops_client_models_of_unfinished_rounds(tmp_path):
    from fedaudit.rundir.client_models import drop_unfinished_rounds

    for r in (1, 2, 3):
        save_client_models(tmp_path, r, {0: _state(r), 1: _state(r)}, "all")
    drop_unfinished_rounds(tmp_path, 2)  # round 3 was interrupted before its record
    assert client_model_rounds(tmp_path) == {1: [0, 1], 2: [0, 1]}


def test_positions_carry_the_best_methods_interval_and_verdicts_when_measured():
    g = np.random.default_rng(0)
    members = np.repeat([1, 0], 100)
    strong = MembershipMetrics.of(np.r_[g.normal(1, 1, 100), g.normal(0, 1, 100)], members)
    weak = MembershipMetrics.of(g.normal(size=200), members)
    (row,) = attack_positions(Evidence({"loss": weak, "entropy": strong}), [], None)
    assert row["best_method"] == "entropy"
    assert row["auc_ci"] == list(strong.auc_ci) and row["verdict"] == strong.verdicts()
    assert row["verdict"]["auc"] == "leaks"
    # the cell's verdict looked at both methods: Holm over 2
    cell = row["cell_verdict"]
    assert cell["outcome"] == "leaks" and cell["tests"] == 2
    assert cell["deciding"]["attack"] == "entropy"
    (bare,) = attack_positions(Evidence({"loss": MembershipMetrics(0.6, 0.1, 0.0, 0.5, 0.01)}),
                               [], None)
    assert "auc_ci" not in bare and "verdict" not in bare and "cell_verdict" not in bare


def test_the_most_exposed_client_decides_a_position_the_pooled_figure_hides():
    """Nine clients of 200 samples at chance and one of 40 whose members all outscore its
    non-members: the pooled AUC (over 1,840 samples) is near 0.5, the client's exact test
    (p = 1 / C(40, 20)) survives Holm over the 11 estimates, and the cell leaks there."""
    g = np.random.default_rng(1)
    per = [MembershipMetrics.of(g.normal(size=200), np.repeat([1, 0], 100)) for _ in range(9)]
    exposed = MembershipMetrics.of(np.r_[g.uniform(1, 2, 20), g.uniform(0, 1, 20)],
                                   np.repeat([1, 0], 20))
    pooled = MembershipMetrics.of(g.normal(size=1840), np.repeat([1, 0], 920))
    verdict = membership_verdict(Evidence({"loss": pooled}, {"loss": [*per, exposed]}))
    assert verdict.outcome == "leaks" and len(verdict.estimates) == 11
    assert verdict.worst_client().scope == "client 9"
    assert verdict.as_dict()["leaking_clients"] == 1
    # without the exposed client nothing leaks, and the small clients keep it inconclusive
    calm = membership_verdict(Evidence({"loss": pooled}, {"loss": per}))
    assert calm.outcome in ("inconclusive", "no leak beyond delta")
