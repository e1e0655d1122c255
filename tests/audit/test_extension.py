"""The middle layer is open: a new audit stage, a new attack target kind, a new defense and
a new server-side probe (tests/helpers/extension.py), registered from outside the
package, reach the schema and validation; an aggregation that hides the clients' updates
from the server makes validation refuse what needs them; what a plug-in writes is what it
declares.  A run that shows them: tests/e2e/test_extension_run.py."""

import pytest

import fedaudit
from fedaudit.audit import STAGES, TARGETS, Stage, TargetKind
from fedaudit.audit import register_stage, register_target
from fedaudit.config import ScenarioError, schema
from fedaudit.defenses import register_defense
from fedaudit.defenses.clip import UpdateClipping
from fedaudit.probes import PROBES, register_probe
from fedaudit.registry import RegistryError

from tests.helpers.extension import FirstRound, RoundLoss, UpdateMax
from tests.helpers.extension import extensions  # noqa: F401 (a fixture)


def test_the_schema_reads_stages_targets_and_defenses(extensions):
    s = schema()
    assert set(s["audit.ext_round_loss"]) == {"round"}
    assert "ext-first-round" in s["attack"]["targets"].item_choices()
    assert "ext-clip" in s["defense"]["kind"].choices()
    sc = fedaudit.validate({"audit.ext_round_loss": {"round": 2}, "federation": {"rounds": 3},
                            "attack": {"targets": ["global", "ext-first-round"]}})
    assert sc.stages["audit.ext_round_loss"]["round"] == 2
    assert sc.sections()["audit.ext_round_loss"] == {"round": 2}
    with pytest.raises(ScenarioError, match=r"audit.ext_round_loss.round = 9: the run has 3"):
        fedaudit.validate({"audit.ext_round_loss": {"round": 9}, "federation": {"rounds": 3}})
    with pytest.raises(ScenarioError, match="unknown.*'nope'.*ext-first-round"):
        fedaudit.validate({"attack": {"targets": ["nope"]}})


def test_an_aggregation_that_hides_the_updates_refuses_what_needs_them(extensions):
    # everything that reads individual updates is switched off, the plug-in probe too: valid
    quiet = {"federation": {"aggregation": "ext-masked"}, "audit.gnq": {"server": False,
                                                                         "client": False}}
    PROBES.unregister(UpdateMax.name)
    assert fedaudit.validate(quiet).federation.aggregation == "ext-masked"
    register_probe(UpdateMax)
    with pytest.raises(ScenarioError, match=r"^scenario dict: always needs each client's "
                       r"update \(probe 'ext-update-max'\), but federation.aggregation = "
                       r"'ext-masked' shows the server only the round's aggregate; "
                       r"aggregations that show it: plain$"):
        fedaudit.validate(quiet)
    PROBES.unregister(UpdateMax.name)
    with pytest.raises(ScenarioError, match=r"audit.gnq.server = true needs each client's "
                       r"update \(probe 'update-gnq'\)"):
        fedaudit.validate({"federation": {"aggregation": "ext-masked"}})
    with pytest.raises(ScenarioError, match=r"attack.targets listing 'clients' needs each "
                       r"client's update \(probe 'client-models'\)"):
        fedaudit.validate({**quiet, "attack": {"targets": ["global", "clients"]}})
    with pytest.raises(ScenarioError, match=r"the 'dp-audit' audit stage needs each client's "
                       r"update \(probe 'dp-gradient-canaries'\)"):
        fedaudit.validate({**quiet, "audit.dp": {"canaries": 10, "level": "gradient"},
                           "defense": {"kind": "dp-sgd"}})
    with pytest.raises(ScenarioError, match=r"audit.gnq.client = true needs each client's "
                       r"audit records \(probe 'client-gnq'\)"):
        fedaudit.validate({"federation": {"aggregation": "ext-masked"},
                           "audit.gnq": {"server": False}})


def test_every_registry_refuses_a_taken_name(extensions):
    class Other(Stage):
        name = "ext-round-loss"

    class OtherKind(TargetKind):
        name = "global"

    class OtherClip(UpdateClipping):
        kind = "ext-clip"

    with pytest.raises(RegistryError, match="already registered"):
        register_stage(Other)
    with pytest.raises(RegistryError, match="already registered"):
        register_target(OtherKind)
    with pytest.raises(RegistryError, match="already registered"):
        register_defense(OtherClip)
    register_stage(RoundLoss)  # the same class again (a module reload) replaces it


def test_a_stage_or_target_kind_that_writes_more_than_it_declares_is_stopped(monkeypatch):
    """The writes a plug-in declares are what it may write: anything else stops the run
    with the stage (or target kind) and the path."""
    from types import SimpleNamespace

    from fedaudit.audit.stages import base
    from fedaudit.audit.stages.attacks import Attacks

    class Sneaky(RoundLoss):
        name = "ext-sneaky"

        def run(self, ctx):
            ctx.results["ext_round_loss"] = {"round": 1}
            ctx.results["clients"][0]["ext_note"] = "mine"

    ctx = SimpleNamespace(scenario=None, results={"clients": [{"client": 0}]})
    monkeypatch.setattr(base, "ordered_stages", lambda: [Sneaky()])
    monkeypatch.setattr(Sneaky, "enabled", lambda self, scenario: True)
    with pytest.raises(RuntimeError, match=r"audit stage 'ext-sneaky' wrote results.json "
                                           r"'clients\[\].ext_note', which its writes do not "
                                           r"declare \(declared: ext_round_loss\)"):
        base.run_stages(ctx)
    monkeypatch.setattr(Sneaky, "writes", ("ext_round_loss", "clients[].ext_note"))
    ctx.results = {"clients": [{"client": 0}]}
    base.run_stages(ctx)  # declared: fine
    assert ctx.results["clients"] == [{"client": 0, "ext_note": "mine"}]

    class Silent(TargetKind):  # a target kind that writes but declares nothing
        name = "ext-silent"

        def targets(self, ctx):
            return []

        def record(self, ctx, results):
            ctx.results["ext_silent"] = len(results)
            return []

    from fedaudit.audit.stages import attacks as attacks_stage
    from fedaudit.console.progress import NoProgress

    monkeypatch.setattr(attacks_stage, "selected_kinds", lambda scenario: [Silent()])
    ctx = SimpleNamespace(scenario=None, results={}, progress=NoProgress(), attacked={},
                          scores=[])
    with pytest.raises(RuntimeError, match=r"target kind 'ext-silent' wrote results.json "
                                           r"'ext_silent', which its writes do not declare "
                                           r"\(declared: nothing\)"):
        Attacks().run(ctx)
    register_target(FirstRound)
    try:
        assert "ext_first_round" in Attacks().writes  # every registered kind's writes
        with pytest.raises(TypeError, match="writes must be a tuple"):
            register_target(type("Bad", (FirstRound,), {"name": "ext-bad", "writes": "x"}))
        with pytest.raises(TypeError, match=r"'a\.\.b'"):
            register_stage(type("Bad", (RoundLoss,), {"name": "ext-bad", "writes": ("a..b",)}))
    finally:
        TARGETS.unregister(FirstRound.name)
        TARGETS.unregister("ext-bad")
        STAGES.unregister("ext-bad")
