"""What a newcomer writes outside the package: a new audit stage, a new attack target kind, a
new defense, a new server-side probe, an aggregation that shows the server only the
aggregate, an aggregator (``federation.strategy``), a label-leakage attack and a whole family
of attacks on updates (with its own registry) that run on the Ray actors, each registered by the ``extensions`` fixture (no file of the package
edited).  tests/audit/test_extension.py checks what validation makes of them,
tests/e2e/test_extension_run.py a run that shows them."""

import numpy as np
import pytest
import torch

from attacks.label_leakage import LABEL_ATTACKS, LabelGuess, register_label_attack
from attacks.update_family import (FAMILIES, Headline, ReportTable, Scored,
                                   UpdateAttackFamily, register_family)
from fedaudit.aggregators import AGGREGATORS, Aggregator, register_aggregator
from fedaudit.audit import STAGES, TARGETS, Stage, Target, TargetKind, attack
from fedaudit.audit import register_stage, register_target
from fedaudit.defenses import DEFENSES, register_defense
from fedaudit.defenses.clip import UpdateClipping
from fedaudit.options import option
from fedaudit.probes import AGGREGATE, PROBES, Probe, register_probe
from fedaudit.probes.aggregation import AGGREGATIONS, Aggregation, register_aggregation
from fedaudit.registry import Registry


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


class ExtMean(Aggregator):
    """Flower's FedAvg under a name of its own."""

    name = "ext-mean"
    flower = "FedAvg"
    describe = "the weighted mean, registered from outside"
    weighted_mean = True


def all_first_class(case, *, share: float = 1.0):
    """Guesses that every sample of the update is of class 0 (``share`` of them, rounded
    down, the rest of class 1)."""
    n = case.training.num_examples
    counts = np.zeros(case.num_classes, dtype=np.int64)
    counts[0] = int(share * n)
    counts[1] = n - counts[0]
    return LabelGuess(counts, {"share": share})


#: the new family's own attack registry (defined here, outside the package: it travels to
#: the actors inside the family, pickled by value)
EXT_MEASURES = Registry("ext update measure", name_pattern=r"[a-z][a-z0-9-]*")


@EXT_MEASURES.register("l2")
def update_l2(case):
    """The L2 norm of the whole update, in float64 (the case's update is float64)."""
    return float(torch.sqrt(sum((u.double() ** 2).sum() for u in case.update.values())))


class UpdateNorm(UpdateAttackFamily):
    """A third family of attacks on updates, registered from outside the package: each
    update's L2 norm, pooled as the mean over the updates."""

    name = "ext_update_norm"
    title = "update norm"
    attacks = EXT_MEASURES
    default_methods = ("l2",)
    column_names = ("ext_norm",)
    order = 300

    def attack(self, case, method, spec, prepared):
        return EXT_MEASURES.get(method)(case)

    def score(self, outputs, scoring):
        cases = [{"client": o.client, "round": o.round, **{m: v for m, v in o.outputs.items()}}
                 for o in outputs]
        pooled = {m: float(np.mean([o.outputs[m] for o in outputs])) for m in scoring.methods}
        return Scored({"cases": cases, "pooled": pooled})

    def console(self, section):
        return f"update norm: mean {section['pooled']['l2']:.4g}"

    def columns(self, section):
        return {"ext_norm": section["pooled"].get("l2")}

    def cell(self, section):
        v = section["pooled"]["l2"]
        return Headline(v, f"mean update norm {v:.4g}")

    def report(self, section):
        return [ReportTable(["measure", "mean over the updates"],
                            [[m, f"{v:.4g}"] for m, v in section["pooled"].items()])]


def round_loss_section(run):
    """The stage's report section: its AUC, from results.json."""
    entry = run.results.get("ext_round_loss")
    return "" if entry is None else f"<p>LOSS on round {entry['round']}: AUC {entry['auc']:.3f}</p>"


@pytest.fixture()
def extensions():
    """Register the stage, target kind, defense, report section, probe and aggregation
    above for one test, and unregister them afterwards."""
    from fedaudit.report.sections import register_section, unregister_section

    register_target(FirstRound)
    register_stage(RoundLoss)
    register_defense(ExtClip)
    register_section("ext-round-loss", "LOSS on one round", html=round_loss_section)
    register_probe(UpdateMax)
    register_aggregation(MASKED)
    register_aggregator(ExtMean)
    register_label_attack("ext-all-first", label="all class 0", options={
        "share": option(float, 1.0, "fraction guessed as class 0", min=0.0, max=1.0)})(
        all_first_class)
    register_family(UpdateNorm)
    yield
    FAMILIES.unregister(UpdateNorm.name)
    TARGETS.unregister(FirstRound.name)
    STAGES.unregister(RoundLoss.name)
    DEFENSES.unregister(ExtClip.kind)
    PROBES.unregister(UpdateMax.name)
    AGGREGATIONS.unregister(MASKED.name)
    AGGREGATORS.unregister(ExtMean.name)
    LABEL_ATTACKS.unregister("ext-all-first")
    unregister_section("ext-round-loss")
