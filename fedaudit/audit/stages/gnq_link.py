"""Does GNQ point at the samples and clients the attack finds? (results.json
``gnq_vs_attack``, from Res-MIA's scores on the final global model)

- per client: Spearman between update GNQ total and the client's Res-MIA AUC;
- per sample: the Res-MIA TPR at a 5% FPR threshold on the members whose client-side GNQ
  (mean over rounds) is in the top 5%, against all members.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage, resmia_on_global
from fedaudit.rundir.layout import GNQ_SAMPLES_NAME


@register_stage
class GnqAttackLink(Stage):
    name = "gnq-link"
    order = 600
    writes = ("gnq_vs_attack",)

    def enabled(self, scenario):
        return resmia_on_global(scenario)

    def run(self, ctx: AuditContext) -> None:
        (res,) = ctx.attacked["global"]
        link = client_link(ctx.results)
        rows = [r for r in res.rows if r.method == "resmia"]
        samples = ctx.run_dir / GNQ_SAMPLES_NAME
        if samples.exists():
            with np.load(samples) as npz:
                link.update(sample_link(npz["sample_id"], npz["score"], rows))
        if link:
            ctx.results["gnq_vs_attack"] = link


def client_link(results: dict) -> dict[str, Any]:
    from scipy.stats import spearmanr

    totals = [c["gnq"].get("update_total") for c in results["clients"]]
    aucs = [c["attacks"]["resmia"]["auc"] for c in results["clients"]]
    pairs = [(t, a) for t, a in zip(totals, aucs) if t is not None]
    if len(pairs) >= 3 and len({p[0] for p in pairs}) > 1 and len({p[1] for p in pairs}) > 1:
        rho, p = spearmanr([p[0] for p in pairs], [p[1] for p in pairs])
        return {"client_update_gnq_vs_resmia_auc": {"spearman": float(rho), "pvalue": float(p),
                                                    "n_clients": len(pairs)}}
    return {}


def sample_link(sid: np.ndarray, score: np.ndarray, rows: list) -> dict[str, Any]:
    uniq, inv = np.unique(sid, return_inverse=True)
    mean_gnq = np.bincount(inv, weights=score) / np.bincount(inv)
    ids = np.concatenate([r.sample_id for r in rows])
    mem = np.concatenate([r.member for r in rows]).astype(bool)
    sc = np.concatenate([r.score for r in rows])
    # each holdout sample once (several clients may have drawn the same one)
    _, first = np.unique(ids[~mem], return_index=True)
    nonmember_scores = sc[~mem][first]
    threshold = np.quantile(nonmember_scores, 0.95)
    member_ids, member_scores = ids[mem], sc[mem]
    has = np.isin(member_ids, uniq)
    if has.sum() < 20:
        return {}
    g = mean_gnq[np.searchsorted(uniq, member_ids[has])]
    top = g >= np.quantile(g, 0.95)
    return {"sample_top5pct_gnq_resmia_tpr": {
        "fpr": float((nonmember_scores > threshold).mean()),
        "tpr_top5pct_gnq": float((member_scores[has][top] > threshold).mean()),
        "tpr_all_members": float((member_scores[has] > threshold).mean()),
        "n_top": int(top.sum()), "n_members": int(has.sum()),
    }}
