"""The malicious server's active membership attack (Nasr et al. 2019; the server kind
:mod:`fedaudit.servers.active_membership`, switched on by ``[active_membership] enabled``):
at round r the server sent the global model after gradient ascent on its targets' loss, so
every target starts the round with a high loss, and the client that holds a member pulls
that member's loss back down.  The score of a target is its loss under the aggregate the
round released, negated (``-loss(theta_r)``: higher means "member"), as Nasr et al. read
the target's gradient after the round.  The passive baseline is the same curious server's
score for the same targets on the honest aggregate before, ``-loss(theta_{r-1})`` (the
LOSS attack).  Both as the AUC /
TPR at low FPR with their intervals and verdicts (:class:`fedaudit.metrics.MembershipMetrics`,
the targets drawn from the clients' samples being the members); results.json
``active_membership``.  It reads only the aggregate, so SecAgg+ does not stop it.  Where the
aggregation shows each update, ``each_update`` also scores a target by its lowest loss
under any one client's model of the round (Nasr et al.'s server that isolates each
participant; the
``client-models`` probe keeps them for the rounds ``attack.rounds`` names).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.metrics import MembershipMetrics
from fedaudit.servers import server_of
from fedaudit.servers.active_membership import GradientAscentServer, targets_of

__all__ = ["ActiveMembership", "target_losses"]


def target_losses(ctx: AuditContext, state: dict[str, torch.Tensor], ids: np.ndarray
                  ) -> np.ndarray:
    """Each target's cross-entropy under the model ``state`` (float64, from the model's
    probabilities; a probability below 1e-300 counts as 1e-300)."""
    x, y = ctx.samples(ids)
    p = ctx.oracle(state).predict_proba(x).astype(np.float64)
    return -np.log(np.maximum(p[np.arange(len(y)), y], 1e-300))


def _sees_updates(scenario) -> bool:
    from fedaudit.probes.aggregation import AGGREGATIONS

    return "updates" in AGGREGATIONS.get(scenario.federation.aggregation).shows


def _lowest_loss(ctx: AuditContext, round_: int, ids: np.ndarray) -> np.ndarray | None:
    """Each target's lowest loss under one client's model of ``round_``, over the clients
    whose model the ``client-models`` probe kept (Nasr et al.'s server that isolates each
    update); None without them."""
    from fedaudit.rundir import load_checkpoint
    from fedaudit.rundir.client_models import client_model_rounds
    from fedaudit.rundir.layout import client_model_path

    clients = client_model_rounds(ctx.run_dir).get(round_, [])
    if not clients:
        return None
    losses = [target_losses(ctx, load_checkpoint(client_model_path(ctx.run_dir, round_, c)),
                            ids) for c in clients]
    return np.min(losses, axis=0)


@register_stage
class ActiveMembership(Stage):
    name = "active-membership"
    order = 475
    writes = ("active_membership",)
    timing = "attack_seconds"

    def enabled(self, scenario):
        return isinstance(server_of(scenario), GradientAscentServer)

    def probes(self, scenario):
        # each client's model, where the aggregation shows the server each update
        return ("client-models",) if _sees_updates(scenario) else ()

    def check(self, scenario):
        t = scenario.stages["active_membership"]
        if t["round"] > scenario.federation.rounds:
            return (f"active_membership.round = {t['round']}: round {t['round']} does not "
                    f"exist; allowed: 2..{scenario.federation.rounds} (federation.rounds "
                    "must be at least 2: the round before is the passive baseline)")
        return None

    def check_data(self, scenario, data):
        if data.text is not None:
            return (f"active_membership.enabled = true: the attack ascends a classifier's "
                    f"loss; data.dataset = {scenario.data.dataset!r} is text")
        return None

    def run(self, ctx: AuditContext) -> None:
        t0 = time.perf_counter()
        server = server_of(ctx.scenario)
        t = ctx.scenario.stages["active_membership"]
        r = t["round"]

        ids, member = targets_of(t, ctx.data)
        before = ctx.trajectory.state(r - 1)
        sent = server.modify(r, dict(before), ctx.scenario, ctx.data)
        losses = {name: target_losses(ctx, s, ids) for name, s in
                  (("sent", sent), ("before", before), ("after", ctx.trajectory.state(r)))}
        active, passive = -losses["after"], -losses["before"]
        lowest = {"active": _lowest_loss(ctx, r, ids), "passive": _lowest_loss(ctx, r - 1, ids)}
        each = {k: None if v is None else -v for k, v in lowest.items()}
        out: dict[str, Any] = {
            "attack": "gradient ascent (Nasr et al. 2019)",
            "threat_model": dict(server.threat_model),
            "aggregation": ctx.scenario.federation.aggregation, "round": r,
            "targets": int(len(ids)), "members": int(member.sum()), "ascent": t["ascent"],
            "steps": t["steps"],
            "loss_rise": float(np.mean(losses["sent"] - losses["before"])),
            "active": MembershipMetrics.of(active, member).as_dict(),
            "passive": MembershipMetrics.of(passive, member).as_dict(),
            "mean_loss_after": {"members": float(losses["after"][member].mean()),
                                "non_members": float(losses["after"][~member].mean())},
            "each_update": {k: None if v is None else MembershipMetrics.of(v, member).as_dict()
                            for k, v in each.items()},
            "seconds": time.perf_counter() - t0, "notes": []}
        for k, v in each.items():
            if v is None and _sees_updates(ctx.scenario):
                out["notes"].append(f"each update, {k}: the client models of its round were "
                                    "not kept (attack.rounds = 'all' keeps them)")
        ctx.results["active_membership"] = out
