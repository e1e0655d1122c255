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
``active_membership``.  Does the ascent add anything?  ``paired``: DeLong's paired test of
the active AUC against a passive one on the same targets
(:func:`fedaudit.verdicts.paired.paired_auc_difference`) -- against the honest server's
aggregate of the *same* round, ``-loss(theta_r^honest)``, where the run knows the honest
run of its federation (``fedaudit matrix``'s main run: :attr:`AuditContext.counterfactual`,
used when its model before round r equals this run's bit for bit), and against the round
before in any case (one round less of member training: a weaker baseline).  It reads only the aggregate, so SecAgg+ does not stop it.  Where the
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
from fedaudit.metrics import MEMBERSHIP_RULE, MembershipMetrics
from fedaudit.servers import server_of
from fedaudit.servers.active_membership import GradientAscentServer, targets_of
from fedaudit.verdicts import Rule, decide
from fedaudit.verdicts.paired import paired_auc_difference

__all__ = ["ActiveMembership", "GAIN_RULE", "target_losses"]

#: the active attack's gain over a passive one on the same targets: an AUC gain within 0.05
#: is "adds at most 0.05"; a gain significantly above 0 is what the ascent adds
GAIN_RULE = Rule(delta=0.05, two_sided=False, figure="AUC gain over the passive attack")


def _honest_round(ctx: AuditContext, round_: int, ids: np.ndarray
                  ) -> tuple[np.ndarray | None, str | None]:
    """The targets' losses under the honest server's aggregate of ``round_``, from the
    counterfactual run (None and why not when there is none, or when its model before the
    round differs from this run's: not the same federation)."""
    from fedaudit.rundir import load_checkpoint
    from fedaudit.rundir.layout import checkpoint_path

    if ctx.counterfactual is None:
        return None, ("no honest run of this federation was given (fedaudit matrix gives its "
                      "main run): the active attack is compared with the round before only")
    before, after = (checkpoint_path(ctx.counterfactual, r) for r in (round_ - 1, round_))
    if not (before.is_file() and after.is_file()):
        return None, (f"the honest run {ctx.counterfactual} has no checkpoint of rounds "
                      f"{round_ - 1} and {round_}")
    mine, theirs = ctx.trajectory.state(round_ - 1), load_checkpoint(before)
    if mine.keys() != theirs.keys() or any(not torch.equal(mine[k], theirs[k]) for k in mine):
        return None, (f"the honest run's model after round {round_ - 1} differs from this "
                      "run's: not the same federation, no paired comparison with it")
    return target_losses(ctx, load_checkpoint(after), ids), None


def _gain(active: np.ndarray, passive: np.ndarray, member: np.ndarray) -> dict[str, Any]:
    """The paired comparison of the active scores with passive ones (module docstring)."""
    est = paired_auc_difference(active, passive, member)
    v = decide(GAIN_RULE, est)
    return {"auc_gain": est.figure, "auc_gain_ci": list(est.interval),
            "p_above": est.p_above, "p_below": est.p_below, "test": est.method,
            "verdict": v.outcome, "verdict_detail": v.as_dict()}


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
        honest_losses, why_not = _honest_round(ctx, r, ids)
        active_metrics = MembershipMetrics.of(active, member)
        cell = decide(MEMBERSHIP_RULE, active_metrics.auc_test)
        out: dict[str, Any] = {
            "attack": "gradient ascent (Nasr et al. 2019)",
            "threat_model": dict(server.threat_model),
            "aggregation": ctx.scenario.federation.aggregation, "round": r,
            "targets": int(len(ids)), "members": int(member.sum()), "ascent": t["ascent"],
            "steps": t["steps"],
            "loss_rise": float(np.mean(losses["sent"] - losses["before"])),
            "active": active_metrics.as_dict(),
            "passive": MembershipMetrics.of(passive, member).as_dict(),
            "honest_same_round": (None if honest_losses is None
                                  else MembershipMetrics.of(-honest_losses, member).as_dict()),
            "paired": {"honest_same_round": (None if honest_losses is None
                                             else _gain(active, -honest_losses, member)),
                       "previous_round": _gain(active, passive, member)},
            "cell_verdict": cell.outcome, "verdict_detail": cell.as_dict(),
            "mean_loss_after": {"members": float(losses["after"][member].mean()),
                                "non_members": float(losses["after"][~member].mean())},
            "each_update": {k: None if v is None else MembershipMetrics.of(v, member).as_dict()
                            for k, v in each.items()},
            "seconds": time.perf_counter() - t0,
            "notes": [why_not] if why_not else []}
        for k, v in each.items():
            if v is None and _sees_updates(ctx.scenario):
                out["notes"].append(f"each update, {k}: the client models of its round were "
                                    "not kept (attack.rounds = 'all' keeps them)")
        ctx.results["active_membership"] = out
