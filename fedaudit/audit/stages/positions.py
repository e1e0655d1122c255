"""The federated attacker's positions side by side (results.json ``attack_positions``;
docs/algorithms.md section 9): the outsider (``global``: the final model), the insider
(``rounds``: the global model after each round) and the curious server (``clients``: each
client's model as the server received it), each with its best method's pooled AUC and
TPR@1%FPR (best = highest AUC).  The insider's figure is its last attacked round (chosen
without labels); the best round is only its named upper bound.  Written when the run
attacked more than the outsider, from the attacks stage's typed results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.targets import selected_kinds
from fedaudit.metrics import MembershipMetrics

#: one attacked model's pooled metrics per method (None: not measurable)
Metrics = Mapping[str, MembershipMetrics | None]


@register_stage
class AttackPositions(Stage):
    name = "positions"
    order = 800
    writes = ("attack_positions",)

    def enabled(self, scenario):
        return scenario.attack.enabled and any(k.position != "outsider"
                                               for k in selected_kinds(scenario))

    def run(self, ctx: AuditContext) -> None:
        outsider = ctx.attacked.get("global")
        sv = ctx.server_view
        ctx.results["attack_positions"] = attack_positions(
            outsider[0].pooled_metrics() if outsider else None,
            [(r.target.round, r.pooled_metrics()) for r in ctx.attacked.get("rounds", [])],
            sv.pooled if sv is not None else None)


def _best(metrics: Metrics) -> tuple[str, MembershipMetrics] | None:
    scored = [(m, v) for m, v in metrics.items() if v is not None]
    return max(scored, key=lambda mv: mv[1].auc) if scored else None


def _uncertainty(a: MembershipMetrics) -> dict[str, Any]:
    """The best method's AUC interval and verdicts (when it has them): the threat matrix's
    cells carry them."""
    verdicts = a.verdicts()  # None when the metrics have no intervals
    return {"auc_ci": list(a.auc_ci), "verdict": verdicts} if verdicts else {}


#: why the insider's best round is an upper bound, not an attack (results.json, report)
UPPER_BOUND_NOTE = ("the maximum pooled AUC over the attacked rounds, with the round picked "
                    "by the membership labels the attacker does not have: an optimistic "
                    "upper bound (a maximum over noisy estimates), not what the insider "
                    "achieves")


def attack_positions(outsider: Metrics | None, rounds: Sequence[tuple[int, Metrics]],
                     server: Metrics | None) -> list[dict[str, Any]]:
    """Per position, the best method's pooled AUC and TPR@1%FPR (with the AUC's interval
    and the verdicts, ``auc_ci`` and ``verdict``, when the metrics have them): the
    ``outsider``'s on
    the final global model, the insider's on the global model after each of the ``rounds``
    (round, metrics), the curious ``server``'s pooled over the clients' received models.
    The insider holds every round's model but no labels to pick among them: its figure is
    the last attacked round (the latest model it holds); the best round is reported beside
    it only as ``best_round_upper_bound``."""
    rows = []

    def add(position: str, target: str, metrics: Metrics, **extra: Any) -> None:
        best = _best(metrics)
        if best:
            m, a = best
            rows.append({"position": position, "target": target, "best_method": m,
                         "auc": a.auc, "tpr_at_1pct_fpr": a.tpr_at_1pct_fpr, **extra,
                         **_uncertainty(a)})

    add("outsider", "final global model", outsider or {})
    per_round = [(r, ms) for r, ms in rounds if _best(ms)]
    if per_round:
        last_round, last = max(per_round, key=lambda r: r[0])
        r_best, m_best, a_best = max(((r, *_best(ms)) for r, ms in per_round),
                                     key=lambda x: x[2].auc)
        add("insider", "global model after each round", last, round=last_round,
            best_round_upper_bound={"round": r_best, "best_method": m_best,
                                    "auc": a_best.auc,
                                    "tpr_at_1pct_fpr": a_best.tpr_at_1pct_fpr,
                                    "note": UPPER_BOUND_NOTE})
    if server:
        add("curious server", "each client's received model", server)
    return rows
