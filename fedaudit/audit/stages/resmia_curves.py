"""Res-MIA's confidence decay (results.json ``resmia_curves``, the report's figure): the
mean confidence of the predicted class at each erosion step, members vs non-members,
pooled over clients, on the final global model."""

from __future__ import annotations

import numpy as np

from attacks.resmia import resmia_scores
from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage, resmia_on_global


@register_stage
class ResmiaCurves(Stage):
    name = "resmia-curves"
    order = 500
    writes = ("resmia_curves",)

    def enabled(self, scenario):
        return resmia_on_global(scenario)

    def run(self, ctx: AuditContext) -> None:
        opts = dict(ctx.attack_options["resmia"])
        opts.pop("score", None)
        opts.pop("scale", None)  # the figure shows the softmax confidence
        oracle = ctx.oracle(ctx.trajectory.final)
        out = {}
        for key in ("members", "nonmembers"):
            ids = np.unique(np.concatenate([getattr(s, key) for s in ctx.sets]))
            _, curves = resmia_scores(oracle, ctx.data.x[ids], labels=ctx.data.y[ids],
                                      return_curves=True, **opts)
            out[key] = curves.mean(axis=0).tolist()
        ctx.results["resmia_curves"] = out
