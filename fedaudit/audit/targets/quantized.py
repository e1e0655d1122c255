"""``quantized``: every quantized release of the global model (the quantization stage's
releases, :class:`fedaudit.audit.products.QuantizedRelease`), so a quantizer reads as a
defense next to the others."""

from __future__ import annotations

import math

from fedaudit.audit.targets.base import Target, register_target
from fedaudit.audit.targets.global_model import ReleasedModel, reference_signals


@register_target
class QuantizedReleases(ReleasedModel):
    name = "quantized"
    describe = "each quantized release of the final model"
    writes = ("quantization[].attacks", "quantization[].client_auc", "rqn_vs_attack")

    def targets(self, ctx):
        methods = self.methods(ctx.scenario)
        return [Target(f"quantized:{name}", self.name, lambda state=release.state: state,
                       methods, references=reference_signals(ctx, methods, name))
                for name, release in ctx.releases.items()]

    def record(self, ctx, results):
        """Each ``quantization[]`` entry's ``attacks`` and ``client_auc``; ``rqn_vs_attack``
        (from the releases' r_Qn and the attacks' AUCs)."""
        by_name = {r.target.name: r for r in results}
        attacked = []  # (r_Qn, the release's results) of the attacked releases
        # the quantization stage wrote one entry per release, in the releases' order
        for entry, (name, release) in zip(ctx.results.get("quantization", []),
                                          ctx.releases.items()):
            res = by_name.get(f"quantized:{name}")
            if res is not None:
                entry["attacks"] = res.entries()
                entry["client_auc"] = {m: [c.auc for c in per]
                                       for m, per in res.per_client.items()}
                attacked.append((release.rqn.median, res))
        if any(res.outcomes for _, res in attacked):
            ctx.results["rqn_vs_attack"] = rqn_vs_attack(
                [(rqn, {m: o.metrics.auc for m, o in res.outcomes.items() if o.metrics})
                 for rqn, res in attacked])
        return [row for r in results for row in r.rows]


def rqn_vs_attack(releases: list[tuple[float, dict[str, float]]]) -> dict[str, dict]:
    """Spearman correlation between r_Qn and each attack's AUC across quantizers
    (``releases``: each attacked release's r_Qn and its AUC per method).  The paper's
    claim: higher r -> lower attack success, i.e. a negative correlation."""
    from scipy.stats import spearmanr

    out = {}
    methods = sorted({m for _, aucs in releases for m in aucs})
    for m in methods:
        pairs = [(rqn, aucs[m]) for rqn, aucs in releases if m in aucs]
        r = [p[0] for p in pairs]
        a = [p[1] for p in pairs]
        if len(pairs) < 3 or len(set(r)) < 2 or len(set(a)) < 2:
            out[m] = {"spearman": None, "pvalue": None, "n": len(pairs),
                      "note": "needs >= 3 quantizers with varying r_Qn and AUC"}
            continue
        rho, p = spearmanr(r, a)  # ranks: an infinite r_Qn is simply the largest
        out[m] = {"spearman": None if math.isnan(rho) else float(rho),
                  "pvalue": None if math.isnan(p) else float(p), "n": len(pairs)}
    return out
