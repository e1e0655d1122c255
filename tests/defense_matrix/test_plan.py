"""Planning a matrix: the presets, each run's keys, and the one-line errors before
anything is written (the bundled digits scenario: the data is bundled with scikit-learn)."""

from __future__ import annotations

import pytest

from fedaudit.config import ScenarioError
from fedaudit.defense_matrix import plan_matrix
from fedaudit.defenses.presets import preset_of

SCENARIO = "reconstruction-digits"


def test_each_defense_has_a_main_run_and_one_run_per_malicious_server():
    plan = plan_matrix(SCENARIO, ["none", "secagg+"], check=False)
    assert [r.key for r in plan.runs] == [
        "none--main", "none--imprint", "none--gradient-ascent",
        "secagg+--main", "secagg+--imprint", "secagg+--gradient-ascent"]
    main = {r.defense: r.scenario for r in plan.runs if r.role == "main"}
    # plain aggregation: every position's target and the families of [matrix] families,
    # on each update and on the rounds' aggregates
    assert main["none"].attack.enabled and main["none"].attack.targets == (
        "global", "rounds", "clients")
    for f in ("label_leakage", "reconstruction"):
        assert main["none"].stages[f]["enabled"]
        assert list(main["none"].stages[f]["on"]) == ["updates", "aggregate"]
        # SecAgg+: on the aggregates only (the server does not see one client's update)
        assert list(main["secagg+"].stages[f]["on"]) == ["aggregate"]
    assert main["none"].federation.aggregation == "plain"
    assert main["secagg+"].attack.targets == ("global", "rounds")
    # property inference models one client's update: off where the server sees none
    assert not main["secagg+"].stages["property_inference"]["enabled"]
    servers = {(r.defense, r.role): r.scenario for r in plan.runs if r.role != "main"}
    imprint = servers[("secagg+", "imprint")]
    assert imprint.stages["imprint"]["enabled"] and not imprint.attack.enabled
    assert imprint.federation.aggregation == "secagg+"
    # trained up to the round the server attacks, not beyond
    ascent = servers[("none", "gradient-ascent")]
    assert ascent.federation.rounds == ascent.stages["active_membership"]["round"] == 2
    assert ascent.stages["active_membership"]["enabled"]


def test_the_defaults_and_the_scenario_table():
    plan = plan_matrix(SCENARIO, None, ["matrix.servers=[]"], check=False)
    defaults = ["none", "dp-sgd", "dp-fedavg", "secagg+", "secagg+dp-fedavg", "sparsify"]
    assert [d.name for d in plan.defenses] == defaults  # [matrix] defenses' default
    assert all(r.role == "main" for r in plan.runs) and len(plan.runs) == len(defaults)
    dp = next(r.scenario for r in plan.runs if r.defense == "dp-fedavg")
    assert (dp.defense.kind, dp.defense.options["noise_multiplier"],
            dp.defense.options["clip_norm"]) == ("dp-client", 1.0, 0.5)
    plan = plan_matrix(SCENARIO, None, ["matrix.defenses=['clip','none']",
                                        "matrix.servers=[]"], check=False)
    assert [d.name for d in plan.defenses] == ["clip", "none"]


def test_a_defense_kind_or_an_aggregation_is_a_one_key_preset():
    assert preset_of("clip").sets == ("defense.kind=clip",)
    assert preset_of("plain").sets == ("federation.aggregation=plain",)
    # a preset fixes the aggregation too: "none" is plain FedAvg whatever the scenario says
    assert "federation.aggregation=plain" in preset_of("none").sets


@pytest.mark.parametrize("defenses, sets, message", [
    (["none", "nope"], [], "matrix.defenses: unknown defense 'nope'; allowed: the presets "
                           "dp-fedavg, dp-sgd, none"),
    (["none", "none"], [], "matrix.defenses: lists a defense twice"),
    ([], [], "matrix.defenses: lists no defense"),
    (["none"], ["matrix.servers=['honest-but-curious']"],
     "matrix.servers: unknown malicious server 'honest-but-curious'; allowed: "),
    (["none"], ["matrix.families=['labels']"], "matrix.families: unknown family 'labels'"),
])
def test_bad_names_fail_in_one_line(defenses, sets, message):
    with pytest.raises(ScenarioError) as err:
        plan_matrix(SCENARIO, defenses, sets, check=False)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_defense_that_does_not_fit_the_scenario_is_named():
    # SecAgg+ needs 3 clients per round: the plain columns alone would run
    plan_matrix(SCENARIO, ["none"], ["federation.num_clients=2"], check=False)
    with pytest.raises(ScenarioError, match=r"^matrix defense 'secagg\+': .*at least 3 "
                                            r"clients per round"):
        plan_matrix(SCENARIO, ["none", "secagg+"], ["federation.num_clients=2"], check=False)


def test_the_runs_are_checked_like_fedaudit_run():
    # the data and the model are built once per run before anything is written
    plan = plan_matrix(SCENARIO, ["none"], ["matrix.servers=['imprint']"])
    assert len(plan.runs) == 2
    with pytest.raises(ScenarioError, match=r"^matrix defense 'none', main run: "):
        plan_matrix(SCENARIO, ["none"], ["matrix.servers=[]", "data.dataset=npz",
                                        "data.path=/nonexistent/x.npz"])


def test_the_main_run_s_server_is_honest_whatever_the_scenario_says():
    # active-membership switches the gradient-ascent server on in its own file
    plan = plan_matrix("active-membership", ["none"], check=False)
    runs = {r.role: r.scenario for r in plan.runs}
    assert not runs["main"].stages["active_membership"]["enabled"]
    assert not runs["main"].stages["imprint"]["enabled"]
    assert runs["imprint"].stages["imprint"]["enabled"]
    assert not runs["imprint"].stages["active_membership"]["enabled"]
    assert runs["gradient-ascent"].stages["active_membership"]["enabled"]
    assert runs["gradient-ascent"].federation.rounds == 3  # the scenario attacks round 3
