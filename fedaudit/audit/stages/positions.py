"""The federated attacker's positions side by side (results.json ``attack_positions``;
docs/algorithms.md section 9): the outsider (``global``: the final model), the insider
(``rounds``: the global model after each round) and the curious server (``clients``: each
client's model as the server received it), each with its best method's pooled AUC and
TPR@1%FPR (best = highest AUC).  Written when the run attacked more than the outsider."""

from __future__ import annotations

from typing import Any

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage


@register_stage
class AttackPositions(Stage):
    name = "positions"
    order = 800
    writes = ("attack_positions",)

    def enabled(self, scenario):
        a = scenario.attack
        return a.enabled and bool({"clients", "rounds"} & set(a.targets))

    def run(self, ctx: AuditContext) -> None:
        ctx.results["attack_positions"] = attack_positions(ctx.results)


def _best(attacks: dict[str, dict]) -> tuple[str, dict] | None:
    scored = [(m, a) for m, a in attacks.items() if a.get("auc") is not None]
    return max(scored, key=lambda ma: ma[1]["auc"]) if scored else None


def attack_positions(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per position, the best method's pooled AUC and TPR@1%FPR."""
    rows = []

    def add(position: str, target: str, attacks: dict, **extra: Any) -> None:
        best = _best(attacks)
        if best:
            m, a = best
            rows.append({"position": position, "target": target, "best_method": m,
                         "auc": a["auc"], "tpr_at_1pct_fpr": a.get("tpr_at_1pct_fpr"), **extra})

    add("outsider", "final global model", results.get("attacks") or {})
    per_round = results.get("round_attacks") or []
    if per_round:
        best = max(((r["round"], *b) for r in per_round if (b := _best(r["attacks"]))),
                   key=lambda x: x[2]["auc"], default=None)
        if best:
            add("insider", "global model after each round", {best[1]: best[2]},
                round=best[0])
    sv = results.get("server_view") or {}
    if sv.get("pooled"):
        add("curious server", "each client's received model", sv["pooled"])
    return rows
