"""The one-run DP audit of a finished run (``[audit.dp]``): score the canaries on the
released global model, guess, bound epsilon (:mod:`fedaudit.dp_audit`), compare with the
accountant's epsilon; results.json ``dp_audit``, ``dp_canaries.npz`` and, when the bound
exceeds the claim, a warning.

Sample level (defense ``none`` / ``dp-sgd``): the canaries are mislabeled holdout samples
planted by :func:`fedaudit.data.build_federated_data`; the score is the negated loss of the
canary under its (wrong) label on the final global model -- black-box, the attack every
release allows -- or, when the run trains reference models (``lira`` / ``rmia`` listed),
LiRA's offline statistic (:func:`attacks.membership.lira.lira_attack`) of the canary against
them: the canaries come out of the holdout before the reference pool is split off, so no
reference ever trained on one and every reference is an OUT model for every canary
(offline LiRA, also in online mode).  The choice depends on the scenario only, never on the
scores.

Gradient level (``dp-sgd``, ``audit.dp.level = "gradient"``): the auditor's white-box
setting -- Dirac gradient canaries inside the clients' DP-SGD steps
(:mod:`fedaudit.dp_audit.gradient`).  The score of canary j is minus the change of its
coordinate summed over the updates its client sent, against the other clients' mean
change of the same coordinate (the server's view, read by the
auditing strategy as the updates arrive, ``dp_gradient/round-NNNN.npz``): what local
DP-SGD's guarantee covers.  The same score on the global model (w_T - w_0) is reported
under ``dp_audit.global``: post-processing of all clients' updates, where the other
clients' noise dilutes the canary.

Client level (``dp-client`` / ``dp-server`` / ``clip``): the canary clients are planted
in the server's strategy stack (:mod:`strategies.canary_clients`); the score of canary j
is <w_T - w_0, u_j> over the model's floating-point entries (w_0 the initial global
model, w_T the released one, u_j the canary's direction) -- what anyone holding the
released models can compute.

The delta of the bound is the defense's ``delta`` (the claimed epsilon's; 1e-5 for a kind
without one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.membership.oracle import Oracle
from attacks.membership.reference_signals import ReferenceSignals
from attacks.membership.lira import lira_attack
from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.data import FederatedData
from fedaudit.dp_audit.canaries import client_inclusion, direction_scores
from fedaudit.dp_audit.gradient import canaries_for_model, global_scores, update_scores
from fedaudit.dp_audit.levels import LEVELS
from fedaudit.servers import served_model
from fedaudit.rundir import atomic_save_npz
from fedaudit.rundir.layout import DP_CANARIES_NAME, dp_gradient_round_path
from fedaudit.scenario import Scenario
from fedaudit.training import per_sample_losses

log = logging.getLogger("fedaudit")

__all__ = ["DpAudit", "add_dp_audit", "canary_scores", "client_audit", "gradient_audit",
           "lira_canary_scores", "sample_audit"]



def canary_scores(scenario: Scenario, data: FederatedData, state: dict[str, torch.Tensor],
                  device: torch.device) -> np.ndarray:
    """Membership score of every sample canary: minus its loss (under its canary label) on
    the model ``state``."""
    assert data.dp_canaries is not None
    model = served_model(scenario, data, seed=scenario.seed)
    model.load_state_dict(state)
    ids = data.dp_canaries.ids
    losses, _ = per_sample_losses(model, data.x[ids], data.y[ids], device=device)
    return -np.asarray(losses, dtype=np.float64)


def _delta(scenario: Scenario) -> float:
    d = scenario.defense.options.get("delta")
    return 1e-5 if d is None else float(d)


def _flat_floats(state: dict[str, torch.Tensor]) -> np.ndarray:
    return np.concatenate([v.detach().cpu().numpy().astype(np.float64).ravel()
                           for v in state.values() if torch.is_floating_point(v)])


def client_audit(scenario: Scenario, data: FederatedData, state: dict[str, torch.Tensor],
                 claimed_epsilon: float | str | None
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(results.json ``dp_audit``, the dp_canaries.npz arrays) of the client-level audit:
    the released model ``state`` against the initial global model."""
    cfg = scenario.audit.dp
    initial = served_model(scenario, data, seed=scenario.seed).state_dict()
    change = _flat_floats(state) - _flat_floats(initial)
    scores = direction_scores(change, scenario.seed, cfg.canaries)
    included = client_inclusion(cfg.canaries, scenario.seed)
    k_plus, k_minus = cfg.guess_counts()
    from fedaudit.dp_audit.summary import audit_summary  # scipy: not in the clients

    summary, guess = audit_summary(scores, included, k_plus=k_plus, k_minus=k_minus,
                                   delta=_delta(scenario), beta=cfg.beta,
                                   claimed_epsilon=claimed_epsilon, level="client",
                                   attack="model-change projection")
    arrays = {"canary": np.arange(cfg.canaries, dtype=np.int64),
              "included": included.astype(np.int8), "score": scores, "guess": guess}
    return summary, arrays


def lira_canary_scores(scenario: Scenario, data: FederatedData,
                       state: dict[str, torch.Tensor],
                       references: list[dict[str, torch.Tensor]],
                       device: torch.device) -> np.ndarray:
    """LiRA's offline score of every sample canary (under its canary label) on the model
    ``state``, the reference models ``references`` all OUT."""
    assert data.dp_canaries is not None
    ids = data.dp_canaries.ids
    model = served_model(scenario, data, seed=scenario.seed)
    bs = scenario.attack.batch_size
    probs = []
    for ref in references:
        model.load_state_dict(ref)
        probs.append(Oracle(model, batch_size=bs, device=device).predict_proba(data.x[ids]))
    signals = ReferenceSignals.out_only(np.stack(probs), data.x, data.y)
    model.load_state_dict(state)
    fixed = bool(scenario.attack.options.get("lira", {}).get("fixed_variance", True))
    return np.asarray(lira_attack(Oracle(model, batch_size=bs, device=device), data.x[ids],
                                  data.y[ids], references=signals, fixed_variance=fixed),
                      dtype=np.float64)


def sample_audit(scenario: Scenario, data: FederatedData, state: dict[str, torch.Tensor],
                 claimed_epsilon: float | str | None, device: torch.device,
                 references: list[dict[str, torch.Tensor]] | None = None
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(results.json ``dp_audit``, the dp_canaries.npz arrays) of the sample-level audit;
    LiRA's statistic with ``references`` (the reference models' states), else the loss."""
    can = data.dp_canaries
    assert can is not None
    if references:
        scores, attack = lira_canary_scores(scenario, data, state, references, device), "lira"
    else:
        scores, attack = canary_scores(scenario, data, state, device), "loss"
    k_plus, k_minus = scenario.audit.dp.guess_counts()
    from fedaudit.dp_audit.summary import audit_summary  # scipy: not in the clients

    summary, guess = audit_summary(scores, can.included, k_plus=k_plus, k_minus=k_minus,
                                   delta=_delta(scenario),
                                   beta=scenario.audit.dp.beta,
                                   claimed_epsilon=claimed_epsilon, level="sample",
                                   attack=attack)
    arrays = {"sample_id": can.ids, "included": can.included.astype(np.int8),
              "client": can.client, "label": can.label, "score": scores, "guess": guess}
    return summary, arrays


def gradient_audit(scenario: Scenario, data: FederatedData, state: dict[str, torch.Tensor],
                   claimed_epsilon: float | str | None, run_dir: Path
                   ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(results.json ``dp_audit``, the dp_canaries.npz arrays) of the white-box gradient
    audit: the server's view (the clients' updates at the canaries, every recorded round)
    on top, the released global model ``state`` against the initial one under ``global``."""
    cfg = scenario.audit.dp
    initial = served_model(scenario, data, seed=scenario.seed)
    canaries, layout = canaries_for_model(cfg.canaries, initial, scenario.federation.num_clients,
                                          scenario.seed)
    rounds = []
    for r in range(1, scenario.federation.rounds + 1):
        path = dp_gradient_round_path(run_dir, r)
        if path.exists():
            with np.load(path) as z:
                rounds.append((z["canary"], z["client"], z["value"]))
    sent = update_scores(canaries, rounds)
    start = initial.state_dict()
    change = {k: (state[k].double() - start[k].double()).numpy() for k in layout.names}
    released = global_scores(canaries, layout, change)
    k_plus, k_minus = cfg.guess_counts()
    from fedaudit.dp_audit.summary import audit_summary  # scipy: not in the clients

    common = dict(k_plus=k_plus, k_minus=k_minus, delta=_delta(scenario), beta=cfg.beta,
                  claimed_epsilon=claimed_epsilon, level="gradient")
    summary, guess = audit_summary(sent, canaries.included, attack="update projection", **common)
    summary["view"] = f"each client's sent updates ({len(rounds)} rounds, the server's view)"
    glob, guess_global = audit_summary(released, canaries.included,
                                       attack="global-model projection", **common)
    summary["global"] = {**glob, "view": "the released global model (post-processing)"}
    arrays = {"canary": np.arange(canaries.m, dtype=np.int64), "coordinate": canaries.coord,
              "client": canaries.client, "included": canaries.included.astype(np.int8),
              "score": sent, "guess": guess, "score_global": released,
              "guess_global": guess_global}
    return summary, arrays


def add_dp_audit(results: dict, scenario: Scenario, data: FederatedData,
                 state: dict[str, torch.Tensor], run_dir: Path, device: torch.device,
                 references: list[dict[str, torch.Tensor]] | None = None) -> None:
    """results.json ``dp_audit`` (and a warning when the bound exceeds ``defense.epsilon``);
    writes dp_canaries.npz.  ``references``: the run's reference models (sample level:
    LiRA's statistic instead of the loss)."""
    claimed = (results.get("defense") or {}).get("epsilon")
    level = scenario.audit.dp.level  # each level's scores (fedaudit.dp_audit.levels)
    if level == "client":
        summary, arrays = client_audit(scenario, data, state, claimed)
    elif level == "gradient":
        summary, arrays = gradient_audit(scenario, data, state, claimed, run_dir)
    elif level == "sample":
        summary, arrays = sample_audit(scenario, data, state, claimed, device, references)
    else:
        raise LookupError(f"audit.dp.level = {level!r}: the DP-audit stage scores no such "
                          "level")
    atomic_save_npz(run_dir / DP_CANARIES_NAME, **arrays)
    results["dp_audit"] = summary
    log.info("DP audit: %d of %d guesses correct on %d canaries: epsilon >= %.3f "
             "(Steinke), mu >= %.3f, epsilon >= %.3f (Gaussian DP) at confidence %.0f%% "
             "(claimed: %s)", summary["correct"], summary["guesses"], summary["canaries"],
             summary["epsilon_lower_bound"], summary["mu_lower_bound"],
             summary["epsilon_lower_bound_gdp"], 100 * (1 - summary["beta"]), claimed)
    from fedaudit.dp_audit.summary import warning_message

    views = [(summary, summary.get("view") if "global" in summary else None)]
    if "global" in summary:
        views.append((summary["global"], summary["global"]["view"]))
    for s, view in views:
        if s["exceeds_claimed"]:
            msg = warning_message(s, view)
            log.warning("%s", msg)
            results["warnings"].append({"round": None, "message": msg})
    summary["exceeds_claimed"] = any(s["exceeds_claimed"] for s, _ in views)


@register_stage
class DpAudit(Stage):
    """The one-run DP audit after the reference models (LiRA's statistic uses them when
    the run trains them)."""

    name = "dp-audit"
    order = 300
    writes = ("dp_audit",)

    def enabled(self, scenario):
        return scenario.audit.dp.canaries > 0

    def check(self, scenario):
        """The guesses fit in the canaries, and the defense has this audit level."""
        from fedaudit.defenses import DEFENSES

        a = scenario.audit.dp
        k_plus, k_minus = a.guess_counts()
        if k_plus + k_minus > a.canaries:
            return (f"audit.dp.k_plus + audit.dp.k_minus = {k_plus + k_minus}: more guesses "
                    f"than audit.dp.canaries ({a.canaries})")
        if k_plus + k_minus == 0:
            return "audit.dp.k_plus = audit.dp.k_minus = 0: the audit needs at least one guess"
        kind = scenario.defense.kind
        defense = DEFENSES.get(kind)
        if defense.dp_audit is None:
            allowed = [k for k in DEFENSES.names() if DEFENSES.get(k).dp_audit]
            return (f"audit.dp.canaries = {a.canaries}: defense.kind = {kind!r} has no DP "
                    "audit; allowed: " + ", ".join(allowed))
        level = LEVELS.get(a.level)
        dpsgd = defense.local_dp(scenario.defense) is not None
        if level.needs_dpsgd and not dpsgd:
            allowed = [k for k in DEFENSES.names()
                       if DEFENSES.get(k).local_dp(scenario.defense) is not None]
            return (f"audit.dp.level = {a.level!r}: defense.kind = {kind!r} trains without "
                    f"DP-SGD, which the {a.level} canaries live in; allowed: "
                    + ", ".join(allowed))
        if a.level != defense.dp_audit and not level.needs_dpsgd:
            fits = [n for n, lv in LEVELS.items() if lv.needs_dpsgd and dpsgd]
            return (f"audit.dp.level = {a.level!r}: defense.kind = {kind!r} is audited at the "
                    f"{defense.dp_audit} level; allowed: 'auto', {defense.dp_audit!r}"
                    + "".join(f", {n!r}" for n in fits))
        return None

    def probes(self, scenario):
        """What the level's scores read on the server (the gradient level: each update at
        the canaries' coordinates)."""
        level = LEVELS.get(scenario.audit.dp.level, None)  # None: "auto" without a level
        return level.probes if level is not None else ()

    def run(self, ctx: AuditContext) -> None:
        ctx.progress.phase("DP audit")
        refs = ctx.references.states if ctx.references is not None else None
        add_dp_audit(ctx.results, ctx.scenario, ctx.data, ctx.trajectory.final, ctx.run_dir,
                     ctx.device, references=refs)
