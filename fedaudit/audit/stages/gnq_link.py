"""Does GNQ point at the samples and clients the attack finds? (results.json
``gnq_vs_attack``, from the scores on the final global model of each attack registered
with ``gnq_link=True``: Res-MIA)

- per client: Spearman between update GNQ total and the client's AUC under the attack
  (``client_update_gnq_vs_<attack>_auc``);
- per sample: the attack's TPR at a 5% FPR threshold on the members whose client-side GNQ
  (mean over rounds) is in the top 5%, against all members
  (``sample_top5pct_gnq_<attack>_tpr``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attacks.membership.registry import gnq_linked
from fedaudit.audit.context import AuditContext
from fedaudit.audit.products import ScoreRows
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.metrics import MembershipMetrics
from fedaudit.rundir.layout import GNQ_SAMPLES_NAME
from fedaudit.scenario import Scenario


def linked_methods(scenario: Scenario) -> tuple[str, ...]:
    """The listed attacks the link is computed for on the final global model."""
    a = scenario.attack
    if not (a.enabled and "global" in a.targets):
        return ()
    return tuple(m for m in a.methods if gnq_linked(m))


@register_stage
class GnqAttackLink(Stage):
    name = "gnq-link"
    order = 600
    writes = ("gnq_vs_attack",)

    def enabled(self, scenario):
        return bool(linked_methods(scenario))

    def run(self, ctx: AuditContext) -> None:
        (res,) = ctx.attacked["global"]
        samples = ctx.run_dir / GNQ_SAMPLES_NAME
        gnq = None
        if samples.exists():
            with np.load(samples) as npz:
                gnq = npz["sample_id"], npz["score"]
        link: dict[str, Any] = {}
        for m in linked_methods(ctx.scenario):
            link.update(client_link(m, ctx.update_gnq_totals, res.per_client[m]))
            if gnq is not None:
                link.update(sample_link(m, *gnq, [r for r in res.rows if r.method == m]))
        if link:
            ctx.results["gnq_vs_attack"] = link


def client_link(method: str, totals: Sequence[float | None],
                metrics: Sequence[MembershipMetrics]) -> dict[str, Any]:
    """Spearman between each client's update GNQ total and its AUC under ``method`` (at
    least 3 clients with a total, neither side constant)."""
    from scipy.stats import spearmanr

    pairs = [(t, m.auc) for t, m in zip(totals, metrics) if t is not None]
    if len(pairs) >= 3 and len({p[0] for p in pairs}) > 1 and len({p[1] for p in pairs}) > 1:
        rho, p = spearmanr([p[0] for p in pairs], [p[1] for p in pairs])
        return {f"client_update_gnq_vs_{method}_auc": {"spearman": float(rho),
                                                       "pvalue": float(p),
                                                       "n_clients": len(pairs)}}
    return {}


def sample_link(method: str, sid: np.ndarray, score: np.ndarray,
                rows: list[ScoreRows]) -> dict[str, Any]:
    """``method``'s TPR at a 5% FPR threshold on the members with the top-5% mean
    client-side GNQ, against all members (at least 20 members with a GNQ)."""
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
    return {f"sample_top5pct_gnq_{method}_tpr": {
        "fpr": float((nonmember_scores > threshold).mean()),
        "tpr_top5pct_gnq": float((member_scores[has][top] > threshold).mean()),
        "tpr_all_members": float((member_scores[has] > threshold).mean()),
        "n_top": int(top.sum()), "n_members": int(has.sum()),
    }}
