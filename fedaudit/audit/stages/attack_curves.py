"""The per-sample curves attacks declare (``register_attack(..., curves=...)``,
:class:`attacks.membership.registry.AttackCurves`; Res-MIA's confidence decay: the mean confidence of
the predicted class at each erosion step), averaged over the members and over the
non-members, pooled over clients, on the final global model: results.json
``<attack>_curves`` (``members``, ``nonmembers``) and the report's figure."""

from __future__ import annotations

import numpy as np

from attacks.membership.registry import ATTACKS, attack_curves
from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.scenario import Scenario


def curve_methods(scenario: Scenario) -> tuple[str, ...]:
    """The listed attacks with declared curves, when the final global model is attacked."""
    a = scenario.attack
    if not (a.enabled and "global" in a.targets):
        return ()
    return tuple(m for m in a.methods if attack_curves(m) is not None)


@register_stage
class AttackCurves(Stage):
    name = "attack-curves"
    order = 500

    @property
    def writes(self) -> tuple[str, ...]:
        """``<attack>_curves`` of every registered attack that declares curves."""
        return tuple(f"{m}_curves" for m in ATTACKS if attack_curves(m) is not None)

    def enabled(self, scenario):
        return bool(curve_methods(scenario))

    def run(self, ctx: AuditContext) -> None:
        oracle = ctx.oracle(ctx.trajectory.final)
        for m in curve_methods(ctx.scenario):
            compute = attack_curves(m).compute
            out = {}
            for key in ("members", "nonmembers"):
                ids = np.unique(np.concatenate([getattr(s, key) for s in ctx.sets]))
                curves = compute(oracle, ctx.data.x[ids], ctx.data.y[ids],
                                 **ctx.attack_options[m])
                out[key] = np.asarray(curves).mean(axis=0).tolist()
            ctx.results[f"{m}_curves"] = out
