"""fedaudit.aggregators: ``federation.strategy`` from the registry, each rule's options in
``[federation.<name>]`` reaching Flower's class, what each rule declares (each update,
server state, the weighted mean) and the one-line refusals that follow from it."""

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict

from fedaudit.aggregators import AGGREGATORS, get_aggregator
from fedaudit.config import ScenarioError, load_scenario


def _one_line_error(scenario, overrides, match):
    with pytest.raises(ScenarioError, match=match) as err:
        load_scenario(scenario, overrides)
    assert "\n" not in str(err.value)


def test_the_strategy_choices_are_the_registered_aggregators():
    assert AGGREGATORS.names() == ("Bulyan", "FedAdagrad", "FedAdam", "FedAvg", "FedAvgM",
                                   "FedMedian", "FedTrimmedAvg", "FedYogi", "Krum", "MultiKrum")
    _one_line_error("quickstart", ["federation.strategy=FedProx"],
                    "federation.strategy.*'FedProx'.*Bulyan, FedAdagrad")
    robust = [a.name for a in AGGREGATORS.values() if a.needs_each_update]
    assert robust == ["FedMedian", "FedTrimmedAvg", "Krum", "MultiKrum", "Bulyan"]
    assert [a.name for a in AGGREGATORS.values() if a.server_state] == [
        "FedAvgM", "FedAdagrad", "FedAdam", "FedYogi"]
    assert [a.name for a in AGGREGATORS.values() if a.weighted_mean] == ["FedAvg"]


def test_each_rules_options_are_its_own_table_with_flowers_defaults():
    import inspect

    import flwr.serverapp.strategy as flower

    s = load_scenario("quickstart")
    assert dict(s.federation.options["FedTrimmedAvg"]) == {"beta": 0.2}
    for agg in AGGREGATORS.values():
        params = inspect.signature(getattr(flower, agg.flower_class)).parameters
        for key, field in agg.options.items():  # a keyword of the class, Flower's default
            assert params[key].default == field.default, (agg.name, key)


def test_a_bad_option_is_refused_naming_its_table():
    _one_line_error("quickstart", ["federation.strategy=FedTrimmedAvg",
                                   "federation.FedTrimmedAvg.beta=0.5"],
                    r"federation.FedTrimmedAvg.beta.*0.5.*< 0.5")
    _one_line_error("quickstart", ["federation.Krum.nope=1"], r"federation.Krum.*nope")


@pytest.mark.parametrize("overrides, match", [
    (["federation.strategy=Bulyan", "federation.num_clients=6",
      "federation.Bulyan.num_malicious_nodes=1"],
     r"^.*federation.Bulyan.num_malicious_nodes = 1: Bulyan needs at least 4f \+ 3 = 7 clients "
     r"per round, this scenario samples 6; allowed: 0..0$"),
    (["federation.strategy=Bulyan", "federation.num_clients=2"],
     r"federation.strategy = 'Bulyan' needs at least 3 clients per round; this scenario samples 2"),
    (["federation.strategy=Krum", "federation.num_clients=6",
      "federation.Krum.num_malicious_nodes=2"],
     r"federation.Krum.num_malicious_nodes = 2: Krum's guarantee needs more than 2f \+ 2 = 6 "
     r"clients per round, this scenario samples 6; allowed: 0..1$"),
    (["federation.strategy=MultiKrum", "federation.num_clients=4",
      "federation.MultiKrum.num_nodes_to_select=5"],
     r"num_nodes_to_select = 5: more than the 4 clients sampled per round; allowed: 1..4$"),
])
def test_what_a_rule_cannot_run_with_is_refused_in_one_line(overrides, match):
    _one_line_error("quickstart", overrides, match)


def test_the_same_options_within_bounds_load():
    s = load_scenario("quickstart", ["federation.strategy=Bulyan", "federation.num_clients=7",
                                     "federation.Bulyan.num_malicious_nodes=1"])
    assert s.federation.options["Bulyan"]["num_malicious_nodes"] == 1
    load_scenario("quickstart", ["federation.strategy=Krum", "federation.num_clients=6",
                                 "federation.Krum.num_malicious_nodes=1"])


@pytest.mark.parametrize("strategy", ["FedMedian", "FedTrimmedAvg", "Krum", "MultiKrum", "Bulyan"])
def test_robust_rules_are_refused_under_secure_aggregation_in_one_line(strategy):
    _one_line_error("secagg", [f"federation.strategy={strategy}"],
                    f"^.*federation.strategy = '{strategy}' needs each client's update, "
                    r"but federation.aggregation = 'secagg\+' shows the server only "
                    "the round's aggregate; aggregations that show it: plain$")


def test_a_server_optimizer_under_secure_aggregation_is_refused_in_one_line():
    _one_line_error("secagg", ["federation.strategy=FedAdam"],
                    r"federation.strategy = 'FedAdam' does not take as the new model "
                    r"\(Adam on the mean update .*\); allowed: FedAvg$")


def _reply(node, arrays):
    out = Message(content=RecordDict({"arrays": ArrayRecord(arrays), "config": ConfigRecord({})}),
                  dst_node_id=node, message_type=MessageType.TRAIN)
    metrics = {"num-examples": 10, "train-loss": 0.5, "partition-id": node - 1}
    return Message(content=RecordDict({"arrays": ArrayRecord(arrays),
                                       "metrics": MetricRecord(metrics)}), reply_to=out)


@pytest.mark.parametrize("beta, cut", [(0.2, 1), (0.4, 2), (0.0, 0)])
def test_trimmed_mean_takes_beta_from_the_scenario(identity, beta, cut):
    """Five clients' models: per coordinate, floor(beta * 5) values cut at each end, the
    rest averaged -- computed here with numpy's sort on the same float32 values; float32
    sums of at most 5 values below 4 in magnitude: within 4 ulps of 4."""
    from fedaudit.simulation.strategy_factory import make_strategy

    s = load_scenario("quickstart", ["federation.strategy=FedTrimmedAvg",
                                     "federation.num_clients=5",
                                     f"federation.FedTrimmedAvg.beta={beta}"])
    strategy = make_strategy(s)
    assert type(strategy).__name__ == "FedTrimmedAvg" and strategy.beta == beta
    g = np.random.default_rng(0)
    models = [g.uniform(-2, 2, (3, 4)).astype(np.float32) for _ in range(5)]
    models[2][0, 0] = 1e6  # an outlier the cut removes when cut >= 1
    arrays, _ = strategy.aggregate_train(1, [_reply(i + 1, {"w": torch.from_numpy(m)})
                                            for i, m in enumerate(models)])
    kept = np.sort(np.stack(models), axis=0)[cut:5 - cut]
    expect = kept.astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(arrays["w"].numpy(), expect, rtol=0,
                               atol=4 * np.finfo(np.float32).eps * max(4.0, abs(expect).max()))
    assert (abs(arrays["w"].numpy()[0, 0]) < 10) == (cut >= 1)


def test_krum_and_bulyan_take_their_options():
    from fedaudit.simulation.strategy_factory import make_strategy

    s = load_scenario("quickstart", ["federation.strategy=MultiKrum", "federation.num_clients=8",
                                     "federation.MultiKrum.num_malicious_nodes=2",
                                     "federation.MultiKrum.num_nodes_to_select=3"])
    st = make_strategy(s)
    assert (st.num_malicious_nodes, st.num_nodes_to_select) == (2, 3)
    s = load_scenario("quickstart", ["federation.strategy=FedAdam", "federation.FedAdam.eta=0.5",
                                     "federation.FedAdam.beta_2=0.9"])
    st = make_strategy(s)
    assert (st.eta, st.beta_2, st.beta_1) == (0.5, 0.9, 0.9)


def test_a_rule_registered_from_outside_is_a_choice_with_its_options():
    from fedaudit.aggregators import Aggregator, register_aggregator
    from fedaudit.options import option

    @register_aggregator
    class Trim10(Aggregator):
        name = "trim10"
        flower = "FedTrimmedAvg"
        describe = "a trimmed mean"
        needs_each_update = True
        options = {"beta": option(float, 0.1, "cut")}

    try:
        s = load_scenario("quickstart", ["federation.strategy=trim10"])
        assert dict(s.federation.options["trim10"]) == {"beta": 0.1}
        assert get_aggregator("trim10").flower_class == "FedTrimmedAvg"
        _one_line_error("secagg", ["federation.strategy=trim10"], "'trim10' needs each")
    finally:
        AGGREGATORS.unregister("trim10")


def test_a_rule_under_a_name_of_federation_or_with_a_bad_option_is_refused():
    from fedaudit.aggregators import Aggregator, register_aggregator

    class Shadow(Aggregator):
        name = "secagg"  # [federation.secagg] is SecAgg+'s table

    with pytest.raises(ValueError, match=r"aggregator 'secagg': \[federation.secagg\] is taken"):
        register_aggregator(Shadow)

    class Loose(Aggregator):
        name = "loose"
        options = {"beta": 0.2}

    with pytest.raises(TypeError, match="option 'beta' must be a fedaudit.options.Field"):
        register_aggregator(Loose)
    assert "secagg" not in AGGREGATORS and "loose" not in AGGREGATORS
