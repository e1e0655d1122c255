"""The middle layer is open: a new audit stage, a new attack target kind, a new defense and
a new server-side probe, each registered from this file alone (no file of the package
edited), reach a run; an aggregation that hides the clients' updates from the server makes
validation refuse what needs them."""

import numpy as np
import pytest

import fedaudit
from fedaudit.audit import STAGES, TARGETS, Stage, Target, TargetKind, attack
from fedaudit.audit import register_stage, register_target
from fedaudit.config import ScenarioError, from_toml, schema
from fedaudit.data import build_federated_data
from fedaudit.models import model_for
from fedaudit.defenses import DEFENSES, register_defense
from fedaudit.defenses.clip import UpdateClipping
from fedaudit.options import option
from fedaudit.probes import AGGREGATE, PROBES, Probe, register_probe
from fedaudit.probes.aggregation import AGGREGATIONS, Aggregation, register_aggregation
from fedaudit.registry import RegistryError
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.layout import client_model_path


class FirstRound(TargetKind):
    """The global model after round 1, attacked like the final one."""

    name = "ext-first-round"
    describe = "the global model after round 1"
    writes = ("ext_first_round",)

    def targets(self, ctx):
        return [Target("ext-first-round:1", self.name, lambda: ctx.trajectory.state(1),
                       ("loss",), per_client=False, round=1)]

    def record(self, ctx, results):
        (res,) = results
        ctx.results["ext_first_round"] = res.metrics()
        return res.rows


class RoundLoss(Stage):
    """LOSS against the global model of one given round (its own scenario table)."""

    name = "ext-round-loss"
    options = {"audit.ext_round_loss": {
        "round": option(int, 1, "the round whose global model LOSS attacks", min=1)}}
    writes = ("ext_round_loss",)

    def enabled(self, scenario):
        return scenario.attack.enabled

    def check(self, scenario):
        r = scenario.stages["audit.ext_round_loss"]["round"]
        if r > scenario.federation.rounds:
            return f"audit.ext_round_loss.round = {r}: the run has {scenario.federation.rounds}"
        return None

    def run(self, ctx):
        r = ctx.scenario.stages["audit.ext_round_loss"]["round"]
        res = attack(ctx, Target(f"ext-round-loss:{r}", "ext-round", lambda: ctx.trajectory.state(r),
                                 ("loss",), per_client=False, round=r))
        ctx.results["ext_round_loss"] = {"round": r, **res.metrics()["loss"]}
        ctx.scores += res.rows


class ExtClip(UpdateClipping):
    """Server-side update clipping under a kind of its own."""

    kind = "ext-clip"


class UpdateMax(Probe):
    """The largest coordinate of each client's update |w_c - w_global|, per round: one number
    per client per round in rounds.jsonl, all rounds in results.json ``probes``."""

    name = "ext-update-max"
    describe = "the largest |coordinate| of each client's update"
    key = "always"

    @classmethod
    def enabled(cls, scenario):
        return True

    def on_round(self, view, record):
        record.entry("ext_update_max", {str(r.client): float(np.abs(r.flat_update).max())
                                        for r in view.replies})

    @classmethod
    def summary(cls, rounds):
        return [{"round": rec["round"], "per_client": rec["ext_update_max"]} for rec in rounds]


#: secure aggregation as far as validation is concerned: the server sees the aggregate only
MASKED = Aggregation("ext-masked", "the server receives only the sum of the updates",
                     frozenset({AGGREGATE}))


def round_loss_section(run):
    """The stage's report section: its AUC, from results.json."""
    entry = run.results.get("ext_round_loss")
    return "" if entry is None else f"<p>LOSS on round {entry['round']}: AUC {entry['auc']:.3f}</p>"


@pytest.fixture()
def extensions():
    from fedaudit.report.sections import register_section, unregister_section

    register_target(FirstRound)
    register_stage(RoundLoss)
    register_defense(ExtClip)
    register_section("ext-round-loss", "LOSS on one round", html=round_loss_section)
    register_probe(UpdateMax)
    register_aggregation(MASKED)
    yield
    TARGETS.unregister(FirstRound.name)
    STAGES.unregister(RoundLoss.name)
    DEFENSES.unregister(ExtClip.kind)
    PROBES.unregister(UpdateMax.name)
    AGGREGATIONS.unregister(MASKED.name)
    unregister_section("ext-round-loss")


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


@pytest.mark.e2e
def test_a_run_shows_the_new_stage_target_and_defense(extensions, tmp_path):
    run = fedaudit.run(
        {"scenario": {"name": "ext"},
         "data": {"max_samples": 400},
         "federation": {"num_clients": 2, "rounds": 1},
         "model": {"name": "mlp", "width": 4},
         "audit.gnq": {"client": False},
         "audit.quantization": {"enabled": False},
         "attack": {"methods": ["loss"], "targets": ["global", "ext-first-round", "clients"]},
         "defense": {"kind": "ext-clip", "clip_norm": 10.0},
         "audit.ext_round_loss": {"round": 1}},
        out=tmp_path, progress=False)
    res = run.results
    assert res["defense"]["kind"] == "ext-clip"
    # one round: the global model after round 1 is the final one, so all three agree
    auc = res["attacks"]["loss"]["auc"]
    assert res["ext_first_round"]["loss"]["auc"] == auc
    assert res["ext_round_loss"] == {"round": 1, **res["ext_first_round"]["loss"]}
    scores = run.scores()
    targets = set(np.asarray(scores["target"]).tolist())
    assert targets == {"global", "ext-first-round:1", "ext-round-loss:1", "client-model:r1"}
    # the probe: one number per client and round, checked against the kept client models
    # and the initial global model (float32 weights, differences taken in float64: exact)
    (entry,) = res["probes"]["ext-update-max"]
    assert entry["round"] == 1 and sorted(entry["per_client"]) == ["0", "1"]
    scenario = from_toml((run.dir / "scenario.toml").read_text(encoding="utf-8"))
    start = model_for(scenario.model, build_federated_data(scenario),
                      seed=scenario.seed).state_dict()  # the initial global model
    for c, value in entry["per_client"].items():
        sent = load_checkpoint(client_model_path(run.dir, 1, int(c)))
        assert value == max(float((sent[k].double() - v.double()).abs().max())
                            for k, v in start.items())
    html = run.report().read_text(encoding="utf-8")
    assert "LOSS on one round" in html and f"AUC {res['ext_round_loss']['auc']:.3f}" in html
