"""What the audit stages share: one typed context per run (:class:`AuditContext`).

A stage reads the scenario, the data and the released trajectory from it, takes the
shared products it needs (the attack split and audit sets are built on first use, so a
stage never depends on which stage asked first) and leaves its own typed products
(:mod:`fedaudit.audit.products`) for later stages: the quantized releases, the reference
models, each target kind's attack results, the curious server's view and the score rows
that become ``scores.npz``.  A stage reads what another produced from here, never from
``results``: results.json is an output, whose entries each stage writes from its own
products (only the paths its ``writes`` declare; :func:`fedaudit.audit.stages.run_stages`
checks).  What training recorded (results.json before the stages) is the context's input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.membership.oracle import Oracle
from fedaudit.audit.reference_models import (AttackSplit, References, ReferenceTrainer,
                                       attack_split)
from fedaudit.audit.products import QuantizedRelease, ScoreRows, ServerView, TargetResult
from fedaudit.audit.sets import ClientAuditSet, PooledAuditSet, attack_options, attack_sets
from fedaudit.audit.update_attacks import UpdateJobRunner
from fedaudit.console.progress import NoProgress, Progress
from fedaudit.data import FederatedData
from fedaudit.servers import served_model
from fedaudit.rundir import load_checkpoint
from fedaudit.scenario import Scenario

__all__ = ["AuditContext", "Trajectory"]


@dataclass(frozen=True)
class Trajectory:
    """One training run's global models: the checkpoint after each round and the final
    (released) state."""

    checkpoints: tuple[Path, ...]
    final: dict[str, torch.Tensor]

    def state(self, round_: int) -> dict[str, torch.Tensor]:
        """The global model after ``round_`` (1-based)."""
        return load_checkpoint(self.checkpoints[round_ - 1])


@dataclass
class AuditContext:
    """The run the stages audit, and what earlier stages produced."""

    scenario: Scenario
    data: FederatedData
    device: torch.device
    run_dir: Path
    results: dict[str, Any]
    trajectory: Trajectory
    #: the extra training seeds' trajectories (``audit.quantization.seeds``)
    extra: tuple[Trajectory, ...] = ()
    progress: Progress = field(default_factory=NoProgress)
    #: trains the reference federations (the simulation layer's Flower trainer)
    reference_trainer: ReferenceTrainer | None = None
    #: runs the attacks on updates (the simulation layer's: the run's Ray actors)
    update_runner: UpdateJobRunner | None = None
    #: quantizer name -> its quantized release and r_Qn (the quantization stage)
    releases: dict[str, QuantizedRelease] = field(default_factory=dict)
    #: the reference models of LiRA / RMIA (the references stage)
    references: References | None = None
    #: target kind -> the attack results of its targets (the attacks stage)
    attacked: dict[str, list[TargetResult]] = field(default_factory=dict)
    #: the curious server's attacks (the attacks stage, ``clients`` target kind)
    server_view: ServerView | None = None
    #: target kind -> the notes its results carry (e.g. why FedMIA skipped a client)
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: every score row, in the order scores.npz stores them
    scores: list[ScoreRows] = field(default_factory=list)
    #: the run directory of the same federation under an honest server (the matrix's main
    #: run), for a malicious server's paired comparison with the same round (None: none)
    counterfactual: Path | None = None

    @cached_property
    def split(self) -> AttackSplit:
        """The never-trained data divided for the attacks (non-member pool, RMIA's
        population, the references' pool)."""
        return attack_split(self.scenario, self.data)

    @cached_property
    def sets(self) -> tuple[ClientAuditSet, ...]:
        """Each client's members and class-matched non-members."""
        return tuple(attack_sets(self.scenario, self.data, self.split.nonmember_pool))

    @cached_property
    def pooled(self) -> PooledAuditSet:
        """Every distinct scored sample of all clients, once."""
        return PooledAuditSet(self.sets)

    @cached_property
    def attack_options(self) -> dict[str, dict[str, Any]]:
        return attack_options(self.scenario)

    @cached_property
    def update_gnq_totals(self) -> tuple[float | None, ...]:
        """Each client's update GNQ summed over the rounds (None: never measured), as
        training recorded it (results.json ``clients[].gnq.update_total``, written before
        the stages)."""
        return tuple(c["gnq"].get("update_total") for c in self.results["clients"])

    @cached_property
    def _model(self) -> torch.nn.Module:
        return served_model(self.scenario, self.data, seed=self.scenario.seed)

    def oracle(self, state: dict[str, torch.Tensor]) -> Oracle:
        """Query access to the model ``state`` (the one model object of the audit, loaded
        with it: an oracle is valid until the next call)."""
        self._model.load_state_dict(state)
        return Oracle(self._model, batch_size=self.scenario.attack.batch_size,
                      device=self.device)

    def model(self) -> torch.nn.Module:
        """The audit's one model object (what :meth:`oracle` loads each state into)."""
        return self._model

    def samples(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of the global sample ids ``ids``."""
        return self.data.x[ids], self.data.y[ids]
