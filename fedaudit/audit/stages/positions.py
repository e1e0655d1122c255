"""The federated attacker's positions side by side (results.json ``attack_positions``;
docs/algorithms.md section 9): the outsider (``global``: the final model), the insider
(``rounds``: the global model after each round) and the curious server (``clients``: each
client's model as the server received it), each with its best method's pooled AUC and
TPR@1%FPR (best = highest AUC) and the position's verdict (``cell_verdict``,
:func:`membership_verdict`): the best of the methods and the most exposed client, corrected
for having looked at every method and client (Holm).  The insider's figure is its last
attacked round (chosen without labels); the best round is only its named upper bound.
Written when the run attacked more than the outsider, from the attacks stage's typed
results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.targets import selected_kinds
from fedaudit.metrics import MEMBERSHIP_RULE, MembershipMetrics
from fedaudit.verdicts import Verdict, decide
from fedaudit.verdicts.outcome import with_scope

#: one attacked model's pooled metrics per method (None: not measurable)
Metrics = Mapping[str, MembershipMetrics | None]


@dataclass(frozen=True)
class Evidence:
    """What a position's attacks measured: each method's ``pooled`` metrics and, per
    method, each client's (``clients``, in client order; None where a client's set held
    one class)."""

    pooled: Metrics
    clients: Mapping[str, Sequence[MembershipMetrics | None]] = field(default_factory=dict)


def membership_verdict(ev: Evidence) -> Verdict | None:
    """A position's verdict (:func:`fedaudit.verdicts.decide`, the membership rule): the
    best method's pooled AUC as the headline, every other method's pooled AUC and every
    client's AUC under each method beside it (Holm over all of them: the best of K attacks
    and the most exposed client are picked after looking); None without a tested AUC."""
    tested = {m: v.auc_test for m, v in ev.pooled.items()
              if v is not None and v.auc_test is not None}
    if not tested:
        return None
    best = max(tested, key=lambda m: ev.pooled[m].auc)
    others = [with_scope(t, "pooled", m) for m, t in tested.items() if m != best]
    for m, per in ev.clients.items():
        others += [with_scope(v.auc_test, f"client {c}", m) for c, v in enumerate(per)
                   if v is not None and v.auc_test is not None]
    return decide(MEMBERSHIP_RULE, with_scope(tested[best], "pooled", best), others)


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
        rounds = ctx.attacked.get("rounds", [])
        last = max(rounds, key=lambda r: r.target.round) if rounds else None
        sv = ctx.server_view
        ctx.results["attack_positions"] = attack_positions(
            Evidence(outsider[0].pooled_metrics(), outsider[0].per_client)
            if outsider else None,
            [(r.target.round, Evidence(r.pooled_metrics(),
                                       _sliced(ctx, r) if r is last else {}))
             for r in rounds],
            Evidence(sv.pooled, _server_clients(sv)) if sv is not None else None)


def _sliced(ctx: AuditContext, result: Any) -> dict[str, list[MembershipMetrics | None]]:
    """Each client's metrics of a target scored on the pooled samples (the insider's
    round model), sliced from the pooled scores as the global model's are."""
    out: dict[str, list[MembershipMetrics | None]] = {}
    for m, o in result.outcomes.items():
        out[m] = [MembershipMetrics.of(o.scores[pos], s.member)
                  if 0 < int(s.member.sum()) < len(s.member) else None
                  for s, pos in zip(ctx.sets, ctx.pooled.positions)]
    return out


def _server_clients(sv: Any) -> dict[str, list[MembershipMetrics | None]]:
    """The curious server's per-client metrics: each client's last attacked model (its
    server-view attacks' scores combined over the rounds where it has them), as pooled."""
    from attacks.membership.registry import server_view

    out: dict[str, list[MembershipMetrics | None]] = {}
    for view in sv.clients:
        if not view.rounds:
            continue
        last = view.rounds[max(view.rounds)]
        for m in sv.pooled:
            combined = view.combined is not None and server_view(m)
            out.setdefault(m, []).append(view.combined if combined else last.get(m))
    return out


def _best(metrics: Metrics) -> tuple[str, MembershipMetrics] | None:
    scored = [(m, v) for m, v in metrics.items() if v is not None]
    return max(scored, key=lambda mv: mv[1].auc) if scored else None


def _uncertainty(a: MembershipMetrics, ev: Evidence) -> dict[str, Any]:
    """The best method's AUC interval and verdicts (when it has them) and the position's
    corrected verdict (``cell_verdict``): the threat matrix's cells carry them."""
    verdicts = a.verdicts()  # None when the metrics have no intervals
    out: dict[str, Any] = {"auc_ci": list(a.auc_ci), "verdict": verdicts} if verdicts else {}
    if (cell := membership_verdict(ev)) is not None:
        out["cell_verdict"] = cell.as_dict()
    return out


#: why the insider's best round is an upper bound, not an attack (results.json, report)
UPPER_BOUND_NOTE = ("the maximum pooled AUC over the attacked rounds, with the round picked "
                    "by the membership labels the attacker does not have: an optimistic "
                    "upper bound (a maximum over noisy estimates), not what the insider "
                    "achieves")


def attack_positions(outsider: Evidence | None, rounds: Sequence[tuple[int, Evidence]],
                     server: Evidence | None) -> list[dict[str, Any]]:
    """Per position, the best method's pooled AUC and TPR@1%FPR (with the AUC's interval
    and the verdicts, ``auc_ci`` and ``verdict``, when the metrics have them, and the
    position's corrected verdict ``cell_verdict``): the ``outsider``'s on
    the final global model, the insider's on the global model after each of the ``rounds``
    (round, metrics), the curious ``server``'s pooled over the clients' received models.
    The insider holds every round's model but no labels to pick among them: its figure is
    the last attacked round (the latest model it holds); the best round is reported beside
    it only as ``best_round_upper_bound``."""
    rows = []

    def add(position: str, target: str, ev: Evidence, **extra: Any) -> None:
        best = _best(ev.pooled)
        if best:
            m, a = best
            rows.append({"position": position, "target": target, "best_method": m,
                         "auc": a.auc, "tpr_at_1pct_fpr": a.tpr_at_1pct_fpr, **extra,
                         **_uncertainty(a, ev)})

    add("outsider", "final global model", outsider or Evidence({}))
    per_round = [(r, ev) for r, ev in rounds if _best(ev.pooled)]
    if per_round:
        last_round, last = max(per_round, key=lambda r: r[0])
        r_best, m_best, a_best = max(((r, *_best(ev.pooled)) for r, ev in per_round),
                                     key=lambda x: x[2].auc)
        add("insider", "global model after each round", last, round=last_round,
            best_round_upper_bound={"round": r_best, "best_method": m_best,
                                    "auc": a_best.auc,
                                    "tpr_at_1pct_fpr": a_best.tpr_at_1pct_fpr,
                                    "note": UPPER_BOUND_NOTE})
    if server:
        add("curious server", "each client's received model", server)
    return rows
