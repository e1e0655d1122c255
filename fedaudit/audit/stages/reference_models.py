"""The reference models of LiRA and RMIA (:mod:`fedaudit.audit.reference_models`: the split,
the reference federations, the cache), trained or loaded before the attacks that use
them; results.json ``references``."""

from __future__ import annotations

from fedaudit.audit.context import AuditContext
from fedaudit.audit.reference_models import attack_split, load_or_train, plan_references
from fedaudit.audit.sets import PooledAuditSet, attack_sets
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
        """Online references come in pairs with complementary IN halves."""
        ref = scenario.attack.reference
        if ref.mode == "online" and ref.models % 2:  # the schema holds models >= 2
            return (f"attack.reference.models = {ref.models}: online mode needs an even "
                    "number >= 2 (each audit sample is IN for half)")
        return None

    def check_data(self, scenario, data):
        """The references must train on as many samples as the target (unless
        ``attack.reference.allow_smaller``): checked on the planned split."""
        if scenario.attack.reference.allow_smaller:
            return None
        split = attack_split(scenario, data)
        audit = PooledAuditSet(tuple(attack_sets(scenario, data, split.nonmember_pool)))
        return plan_references(scenario, data, split, audit.ids).sizes.shortfall()

    def run(self, ctx: AuditContext) -> None:
        if ctx.reference_trainer is None:
            raise RuntimeError("the references stage needs AuditContext.reference_trainer "
                               "(fedaudit.simulation.reference_federations.reference_trainer)")
        ctx.progress.phase("reference models")
        ctx.references = load_or_train(
            ctx.scenario, ctx.data, ctx.split, ctx.pooled.ids, ctx.reference_trainer,
            step=lambda k, n, info: ctx.progress.step("references", k, n, info))
        ctx.results["references"] = ctx.references.summary()
        sizes = ctx.references.plan.sizes
        if not sizes.parity:  # allowed by attack.reference.allow_smaller
            ctx.results["warnings"].append({"round": None, "message": (
                f"reference models trained on {min(sizes.per_reference)} samples, the target "
                f"on {sizes.target} (attack.reference.allow_smaller): references trained on "
                "less data than the target make LiRA and RMIA weaker than they are")})
