"""The reference models of LiRA and RMIA (:mod:`fedaudit.audit.references`: the split,
the reference federations, the cache), trained or loaded before the attacks that use
them; results.json ``references``."""

from __future__ import annotations

from attacks.registry import trains_references
from fedaudit.audit.context import AuditContext
from fedaudit.audit.references import load_or_train
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.targets.base import uses_references


@register_stage
class References(Stage):
    name = "references"
    order = 200
    writes = ("references",)

    def enabled(self, scenario):
        return uses_references(scenario)

    def check(self, scenario):
        """The reference federations are trained in-process as FedAvg with the clients'
        own training code: they reproduce the target's recipe for FedAvg only."""
        need = [m for m in scenario.attack.methods if trains_references(m)]
        what = f"attack.methods lists {', '.join(need)} (reference-model attacks)"
        if scenario.federation.strategy != "FedAvg":
            return (f"{what}: the reference models are trained as FedAvg federations; "
                    f"federation.strategy = {scenario.federation.strategy!r} is not supported "
                    "with them (allowed: 'FedAvg')")
        ref = scenario.attack.reference
        if ref.mode == "online" and ref.models % 2:  # the schema holds models >= 2
            return (f"attack.reference.models = {ref.models}: online mode needs an even "
                    "number >= 2 (each audit sample is IN for half)")
        return None

    def run(self, ctx: AuditContext) -> None:
        ctx.progress.phase("reference models")
        ctx.references = load_or_train(
            ctx.scenario, ctx.data, ctx.split, ctx.pooled.ids, ctx.device,
            step=lambda k, n, info: ctx.progress.step("references", k, n, info))
        ctx.results["references"] = ctx.references.summary()
