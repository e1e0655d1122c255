"""The one-run DP audit of a finished run (``[audit.dp]``): score the canaries on the
released global model, guess, bound epsilon (:mod:`fedaudit.dp_audit`), compare with the
accountant's epsilon; results.json ``dp_audit``, ``dp_canaries.npz`` and, when the bound
exceeds the claim, a warning.

Sample level (defense ``none`` / ``dp-sgd``): the canaries are mislabeled holdout samples
planted by :func:`fedaudit.data.build_federated_data`; the score is the negated loss of the
canary under its (wrong) label on the final global model -- black-box, the attack every
release allows.  The delta of the bound is the defense's ``delta`` (the claimed epsilon's).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedaudit.data import FederatedData
from fedaudit.dp_audit.summary import audit_summary, warning_message
from fedaudit.models import model_for
from fedaudit.rundir import atomic_save_npz
from fedaudit.scenario import Scenario
from fedaudit.training import per_sample_losses

log = logging.getLogger("fedaudit")

__all__ = ["add_dp_audit", "canary_scores", "DP_CANARIES_NAME"]

DP_CANARIES_NAME = "dp_canaries.npz"


def canary_scores(scenario: Scenario, data: FederatedData, state: dict[str, torch.Tensor],
                  device: torch.device) -> np.ndarray:
    """Membership score of every sample canary: minus its loss (under its canary label) on
    the model ``state``."""
    assert data.dp_canaries is not None
    model = model_for(scenario.model, data, seed=scenario.seed)
    model.load_state_dict(state)
    ids = data.dp_canaries.ids
    losses, _ = per_sample_losses(model, data.x[ids], data.y[ids], device=device)
    return -np.asarray(losses, dtype=np.float64)


def sample_audit(scenario: Scenario, data: FederatedData, state: dict[str, torch.Tensor],
                 claimed_epsilon: float | str | None,
                 device: torch.device) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(results.json ``dp_audit``, the dp_canaries.npz arrays) of the sample-level audit."""
    can = data.dp_canaries
    assert can is not None
    scores = canary_scores(scenario, data, state, device)
    k_plus, k_minus = scenario.audit.dp.guess_counts()
    summary, guess = audit_summary(scores, can.included, k_plus=k_plus, k_minus=k_minus,
                                   delta=float(scenario.defense.options["delta"]),
                                   beta=scenario.audit.dp.beta,
                                   claimed_epsilon=claimed_epsilon, level="sample",
                                   attack="loss")
    arrays = {"sample_id": can.ids, "included": can.included.astype(np.int8),
              "client": can.client, "label": can.label, "score": scores, "guess": guess}
    return summary, arrays


def add_dp_audit(results: dict, scenario: Scenario, data: FederatedData,
                 state: dict[str, torch.Tensor], run_dir: Path, device: torch.device) -> None:
    """results.json ``dp_audit`` (and a warning when the bound exceeds ``defense.epsilon``);
    writes dp_canaries.npz."""
    claimed = (results.get("defense") or {}).get("epsilon")
    summary, arrays = sample_audit(scenario, data, state, claimed, device)
    atomic_save_npz(run_dir / DP_CANARIES_NAME, **arrays)
    results["dp_audit"] = summary
    log.info("DP audit: %d of %d guesses correct on %d canaries: epsilon >= %.3f at "
             "confidence %.0f%% (claimed: %s)", summary["correct"], summary["guesses"],
             summary["canaries"], summary["epsilon_lower_bound"], 100 * (1 - summary["beta"]),
             claimed)
    if summary["exceeds_claimed"]:
        msg = warning_message(summary)
        log.warning("%s", msg)
        results["warnings"].append({"round": None, "message": msg})
