"""The one attack loop: target -> oracle -> scores -> metrics -> score rows.

:func:`attack` runs a target's methods on its samples (:func:`attacks.membership.evaluate_attacks`
with the scenario's attack options: each method's typed outcome with its pooled metrics over
the distinct scored samples) and, for a target scored on every client, each client's
metrics on its own set; it returns them as one :class:`TargetResult`, whose
:class:`ScoreRows` are what scores.npz stores.  Every target of every kind goes through
here (a stage that attacks a model of its own builds a :class:`Target` and calls it).  The
attacker holds the oracle only (probabilities).  The DP audit's canary scores and the
reference models' signals query models outside this loop: they are not attacks on a
target.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from attacks.membership import evaluate_attacks
from attacks.membership.registry import ATTACKS
from fedaudit.audit.context import AuditContext
from fedaudit.audit.products import ScoreRows, TargetResult
from fedaudit.audit.targets.base import Target
from fedaudit.metrics import MembershipMetrics
from fedaudit.rundir import atomic_save_npz
from fedaudit.rundir.layout import SCORES_NAME

log = logging.getLogger("fedaudit")

__all__ = ["AttackTracker", "attack", "write_scores"]


class AttackTracker:
    """Progress of the attack phase in samples (target x scored sample), advanced after
    each method by its share of the target's oracle queries (Res-MIA costs K + 1 per
    sample, the baselines 1), so the ETA follows the real cost; one line per finished
    (target, method) in run.log."""

    def __init__(self, ctx: AuditContext, targets: list[Target]) -> None:
        self.progress, self.targets = ctx.progress, targets
        self.cost = _queries_per_sample(ctx, {m for t in targets for m in t.methods})
        self.size = [len(ctx.sets[t.client].ids) if t.client is not None
                     else len(ctx.pooled.ids) for t in targets]
        self.total = float(sum(self.size))
        self.done, self.index, self.t0 = 0.0, 0, time.perf_counter()

    def start(self, index: int) -> None:
        self.index = index
        self._show(self.targets[index].methods[0])

    def _show(self, method: str) -> None:
        t = self.targets[self.index]
        self.progress.step("attacks", round(self.done), round(self.total),
                           f"{t.name} ({self.index + 1}/{len(self.targets)}): {method}")

    def method_done(self, method: str, seconds: float) -> None:
        t, n = self.targets[self.index], self.size[self.index]
        per_target = sum(self.cost[m] for m in t.methods)
        self.done += n * self.cost[method] / per_target if per_target > 0 else 0.0
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        log.info("attack %s on %s: %d samples in %.1f s; %d of %d samples done, eta %.0f s",
                 method, t.name, n, seconds, round(self.done), round(self.total), eta)
        nxt = t.methods.index(method) + 1
        self._show(t.methods[nxt] if nxt < len(t.methods) else "done")

    def finish(self) -> None:
        if self.targets:
            self.progress.step("attacks", round(self.total), round(self.total), "done")


def _queries_per_sample(ctx: AuditContext, methods: set[str]) -> dict[str, float]:
    """Oracle queries per sample of each method (for the ETA only): the ``cost`` an attack
    declared at registration, else 1."""
    out = {}
    for m in methods:
        cost = ATTACKS.meta(m).get("cost")
        try:
            out[m] = float(cost(ctx.data.x.shape[1:], **ctx.attack_options.get(m, {}))) \
                if cost else 1.0
        except Exception:  # noqa: BLE001 - an estimate; the attack itself reports bad options
            out[m] = 1.0
    return out


def attack(ctx: AuditContext, target: Target, tracker: AttackTracker | None = None) -> TargetResult:
    """Every method of ``target`` on its samples; pooled and per-client metrics; rows."""
    if target.client is None:
        ids, member = ctx.pooled.ids, ctx.pooled.member
    else:
        s = ctx.sets[target.client]
        ids, member = s.ids, s.member
    # the references first: computing their signals loads their states into the audit's
    # model object, which then takes the target's
    refs = target.references(ids) if target.references is not None else None
    oracle = ctx.oracle(target.load())
    x, y = ctx.samples(ids)
    outcomes = evaluate_attacks(oracle, x, y, member, target.methods, ctx.attack_options,
                                on_method=tracker.method_done if tracker is not None else None,
                                references=refs, vocabulary=ctx.data.classes)
    n_refs = int(refs.probs.shape[0]) if refs is not None else None
    if target.client is not None or not target.per_client:
        client = -1 if target.client is None else target.client
        rows = tuple(ScoreRows(target.name, m, ids, np.full(len(ids), client), member, o.scores)
                     for m, o in outcomes.items())
        return TargetResult(target, ids, member, outcomes, reference_models=n_refs, rows=rows)
    per_client, rows = _per_client(ctx, target, outcomes)
    return TargetResult(target, ids, member, outcomes, per_client, n_refs, rows)


def _per_client(ctx: AuditContext, target: Target, outcomes: dict
                ) -> tuple[dict[str, tuple[MembershipMetrics, ...]], tuple[ScoreRows, ...]]:
    """Each client's metrics on its own set, sliced from the pooled scores, and its rows."""
    per_client, rows = {}, []
    for method, o in outcomes.items():
        metrics = []
        for c, (s, pos) in enumerate(zip(ctx.sets, ctx.pooled.positions)):
            scores = o.scores[pos]
            metrics.append(MembershipMetrics.of(scores, s.member))
            rows.append(ScoreRows(target.name, method, s.ids, np.full(len(pos), c), s.member,
                                  scores))
        per_client[method] = tuple(metrics)
    return per_client, tuple(rows)


def write_scores(ctx: AuditContext) -> None:
    """scores.npz from every row the stages produced (nothing when there are none)."""
    rows = ctx.scores
    if not rows:
        return
    atomic_save_npz(
        ctx.run_dir / SCORES_NAME,
        target=np.concatenate([np.full(len(r.sample_id), r.target) for r in rows]).astype(str),
        method=np.concatenate([np.full(len(r.sample_id), r.method) for r in rows]).astype(str),
        sample_id=np.concatenate([r.sample_id for r in rows]).astype(np.int64),
        client=np.concatenate([r.client for r in rows]).astype(np.int64),
        member=np.concatenate([r.member for r in rows]).astype(np.int8),
        score=np.concatenate([r.score for r in rows]).astype(np.float64))
