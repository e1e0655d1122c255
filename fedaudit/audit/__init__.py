"""The audit after the last round: a pipeline of stages over targets.

- :mod:`~fedaudit.audit.context`: :class:`AuditContext`, what the stages share (scenario,
  data, the released trajectory, the attack split and audit sets, the typed products of
  earlier stages) and :class:`Trajectory`;
- :mod:`~fedaudit.audit.products`: those typed products (:class:`TargetResult`,
  :class:`ScoreRows`, the quantized releases, the curious server's view);
- :mod:`~fedaudit.audit.targets`: :class:`Target` and the registry of target kinds
  (``attack.targets``: ``global``, ``quantized``, ``rounds``, ``clients``);
- :mod:`~fedaudit.audit.attack_loop`: the one attack loop (target -> oracle -> scores ->
  metrics -> :class:`ScoreRows`);
- :mod:`~fedaudit.audit.stages`: :class:`Stage`, the registry and the built-in stages
  (quantization and r_Qn, reference models, DP audit, attacks, secrets, the attacks'
  declared curves, GNQ-attack link, attacker positions, scores.npz);
- :mod:`~fedaudit.audit.writes`: the results.json paths a stage declares it writes, and
  the check that it wrote no other;
- :mod:`~fedaudit.audit.sets`, :mod:`~fedaudit.audit.reference_models`,
  :mod:`~fedaudit.audit.results`: the audit sets, the reference federations, results.json
  up to the stages.

:func:`run_audit` runs the stages on a finished training run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from fedaudit.audit.attack_loop import attack
from fedaudit.audit.context import AuditContext, Trajectory
from fedaudit.audit.products import ScoreRows, TargetResult
from fedaudit.audit.reference_models import ReferenceTrainer
from fedaudit.audit.stages import STAGES, Stage, register_stage, run_stages
from fedaudit.audit.update_attacks import UpdateJobRunner
from fedaudit.audit.targets import TARGETS, Target, TargetKind, register_target
from fedaudit.console.progress import NoProgress, Progress
from fedaudit.data import FederatedData
from fedaudit.scenario import Scenario

__all__ = ["STAGES", "TARGETS", "AuditContext", "ScoreRows", "Stage", "Target", "TargetKind",
           "TargetResult", "Trajectory", "attack", "register_stage", "register_target",
           "run_audit"]


def run_audit(scenario: Scenario, data: FederatedData, trajectory: Trajectory,
              extra: list[Trajectory], run_dir: Path, results: dict[str, Any],
              device: torch.device, progress: Progress | None = None, *,
              reference_trainer: ReferenceTrainer | None = None,
              update_runner: UpdateJobRunner | None = None,
              counterfactual: Path | None = None) -> dict[str, float]:
    """Every enabled stage on a finished training run, filling ``results``; the seconds
    spent (results.json ``timing``: ``audit_seconds``, ``attack_seconds``).
    ``reference_trainer`` trains LiRA's / RMIA's reference federations (the run's:
    :func:`fedaudit.simulation.reference_federations.reference_trainer`);
    ``update_runner`` runs the attacks on updates (the run's:
    :func:`fedaudit.simulation.update_attack_jobs.update_job_runner`; default: this
    process); ``counterfactual``: the run directory of the same federation with an honest
    server (``fedaudit matrix``'s main run), which a malicious server's stage compares with
    (:attr:`AuditContext.counterfactual`)."""
    ctx = AuditContext(scenario, data, device, Path(run_dir), results, trajectory,
                       tuple(extra), progress or NoProgress(),
                       reference_trainer=reference_trainer, update_runner=update_runner,
                       counterfactual=counterfactual)
    return run_stages(ctx)
