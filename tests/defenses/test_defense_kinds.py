"""The ``[defense]`` section: its keys and cross-checks, the bundled defense scenarios, and a
defense as one registered class."""

import pytest

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.defenses import defense_summary


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
    assert dict(s.defense.options) == {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-5,
                                       "keep": 0.1}
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
