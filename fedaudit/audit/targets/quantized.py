"""``quantized``: every quantized release of the global model (the quantization stage's
releases), so a quantizer reads as a defense next to the others."""

from __future__ import annotations

import math

from fedaudit.audit.targets.base import Target, register_target
from fedaudit.audit.targets.global_model import ReleasedModel, reference_signals


@register_target
class QuantizedReleases(ReleasedModel):
    name = "quantized"
    describe = "each quantized release of the final model"

    def targets(self, ctx):
        return [Target(f"quantized:{name}", self.name, lambda state=state: state,
                       self.methods(ctx.scenario), references=reference_signals(ctx, name))
                for name, state in ctx.releases.items()]

    def record(self, ctx, results):
        """Each ``quantization[]`` entry's ``attacks`` and ``client_auc``; ``rqn_vs_attack``."""
        by_name = {r.target.name: r for r in results}
        entries = ctx.results.get("quantization", [])
        for entry in entries:
            res = by_name.get(f"quantized:{entry['quantizer']}")
            if res is not None:
                entry["attacks"] = res.pooled
                entry["client_auc"] = {m: [c[m]["auc"] for c in res.clients]
                                       for m in res.pooled}
        if entries and any(e["attacks"] for e in entries):
            ctx.results["rqn_vs_attack"] = rqn_vs_attack(entries)
        return [row for r in results for row in r.rows]


def rqn_vs_attack(entries: list[dict]) -> dict[str, dict]:
    """Spearman correlation between r_Qn and each attack's AUC across quantizers.
    The paper's claim: higher r -> lower attack success, i.e. a negative correlation."""
    from scipy.stats import spearmanr

    out = {}
    methods = sorted({m for e in entries for m in e["attacks"]})
    for m in methods:
        pairs = [(e["rqn"], e["attacks"][m]["auc"]) for e in entries if m in e["attacks"]]
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
