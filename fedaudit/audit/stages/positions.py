"""The federated attacker's positions side by side (results.json ``attack_positions``;
docs/algorithms.md section 9): the outsider (``global``: the final model), the insider
(``rounds``: the global model after each round) and the curious server (``clients``: each
client's model as the server received it), each with its best method's pooled AUC and
TPR@1%FPR (best = highest AUC).  The insider's figure is its last attacked round (chosen
without labels); the best round is only its named upper bound.  Written when the run
attacked more than the outsider."""

from __future__ import annotations

from typing import Any

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.targets import selected_kinds


@register_stage
class AttackPositions(Stage):
    name = "positions"
    order = 800
    writes = ("attack_positions",)

    def enabled(self, scenario):
        return scenario.attack.enabled and any(k.position != "outsider"
                                               for k in selected_kinds(scenario))

    def run(self, ctx: AuditContext) -> None:
        ctx.results["attack_positions"] = attack_positions(ctx.results)


def _best(attacks: dict[str, dict]) -> tuple[str, dict] | None:
    scored = [(m, a) for m, a in attacks.items() if a.get("auc") is not None]
    return max(scored, key=lambda ma: ma[1]["auc"]) if scored else None


#: why the insider's best round is an upper bound, not an attack (results.json, report)
UPPER_BOUND_NOTE = ("the maximum pooled AUC over the attacked rounds, with the round picked "
                    "by the membership labels the attacker does not have: an optimistic "
                    "upper bound (a maximum over noisy estimates), not what the insider "
                    "achieves")


def attack_positions(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per position, the best method's pooled AUC and TPR@1%FPR.  The insider holds every
    round's model but no labels to pick among them: its figure is the last attacked round
    (the latest model it holds); the best round is reported beside it only as
    ``best_round_upper_bound``."""
    rows = []

    def add(position: str, target: str, attacks: dict, **extra: Any) -> None:
        best = _best(attacks)
        if best:
            m, a = best
            rows.append({"position": position, "target": target, "best_method": m,
                         "auc": a["auc"], "tpr_at_1pct_fpr": a.get("tpr_at_1pct_fpr"), **extra})

    add("outsider", "final global model", results.get("attacks") or {})
    per_round = [r for r in results.get("round_attacks") or [] if _best(r["attacks"])]
    if per_round:
        last = max(per_round, key=lambda r: r["round"])
        r_best, m_best, a_best = max(((r["round"], *_best(r["attacks"])) for r in per_round),
                                     key=lambda x: x[2]["auc"])
        add("insider", "global model after each round", last["attacks"], round=last["round"],
            best_round_upper_bound={"round": r_best, "best_method": m_best,
                                    "auc": a_best["auc"],
                                    "tpr_at_1pct_fpr": a_best.get("tpr_at_1pct_fpr"),
                                    "note": UPPER_BOUND_NOTE})
    sv = results.get("server_view") or {}
    if sv.get("pooled"):
        add("curious server", "each client's received model", sv["pooled"])
    return rows
