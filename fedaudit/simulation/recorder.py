"""The round recorder: what the auditing strategy hands over after every round becomes a
durable checkpoint and ``rounds.jsonl`` line (with what the round's probes recorded)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import numpy as np
import torch
from flwr.app import ArrayRecord

from fedaudit.data import FederatedData
from fedaudit.training.health import chance_level_warning
from fedaudit.servers import served_model
from fedaudit.audit.context import Trajectory
from fedaudit.rundir import append_jsonl, atomic_torch_save, atomic_write_text
from fedaudit.probes.client_gnq import read_client_gnq
from fedaudit.rundir.layout import checkpoint_path, checkpoints_dir, rng_path, rounds_path
from fedaudit.rundir.client_models import drop_unfinished_rounds
from fedaudit.console.progress import Progress
from fedaudit.scenario import Scenario
from fedaudit.training import evaluate
from strategies.auditing import RoundAudit

log = logging.getLogger("fedaudit")


class RunRecorder:
    """Receives every round from the strategy: evaluates, checkpoints, logs, records.

    Each finished round is durable before the next starts: the probes' files of the round
    (:class:`fedaudit.probes.RoundRecord`, written as the strategy ran them), the checkpoint
    and the server's RNG state are written atomically, then the round's line -- with the
    probes' rounds.jsonl keys -- is appended to the jsonl file: a round counts as finished
    exactly when its line is there.  :meth:`resume_point` reads that back.
    """

    def __init__(self, scenario: Scenario, data: FederatedData, run_dir: Path,
                 device: torch.device, progress: Progress | None, *, train_seed: int,
                 subdir: str = "") -> None:
        self.scenario, self.data, self.run_dir = scenario, data, run_dir
        self.device, self.progress, self.train_seed = device, progress, train_seed
        self.subdir = subdir
        checkpoints_dir(run_dir, subdir).mkdir(parents=True, exist_ok=True)
        self.jsonl = rounds_path(run_dir, subdir)
        self.model = served_model(scenario, data, seed=train_seed)
        self.rounds: list[dict] = []
        self.checkpoints: list[Path] = []
        self.current: dict[str, torch.Tensor] = {k: v.clone() for k, v in
                                                 self.model.state_dict().items()}
        self.live_privacy: dict | None = None

    def resume_point(self) -> int:
        """Load the finished rounds of an interrupted run; return how many there are."""
        from fedaudit.rundir import load_checkpoint, read_jsonl

        done = []
        for rec in read_jsonl(self.jsonl):
            if rec.get("round") != len(done) + 1:
                break
            if not checkpoint_path(self.run_dir, rec["round"], self.subdir).exists():
                break
            done.append(rec)
        # rewrite the log without a torn or orphan tail, so appends continue cleanly
        atomic_write_text(self.jsonl, "".join(json.dumps(r) + "\n" for r in done))
        self.rounds = done
        if not self.subdir:  # the released trajectory
            drop_unfinished_rounds(self.run_dir, len(done))
        self.checkpoints = [checkpoint_path(self.run_dir, r["round"], self.subdir) for r in done]
        if done:
            self.current = load_checkpoint(self.checkpoints[-1])
            rng = rng_path(self.run_dir, len(done), self.subdir)
            if rng.exists():
                state = json.loads(rng.read_text())
                random.setstate((state[0], tuple(state[1]), state[2]))
        return len(done)

    def __call__(self, round_: int, arrays: ArrayRecord | None, audit: RoundAudit) -> None:
        if arrays is not None:
            self.current = arrays.to_torch_state_dict()
        self.model.load_state_dict(self.current)
        acc, loss = evaluate(self.model, self.data.x[self.data.test], self.data.y[self.data.test],
                             device=self.device)
        path = checkpoint_path(self.run_dir, round_, self.subdir)
        atomic_torch_save(self.current, path)
        # Python's RNG picks the clients of the next round (flwr's sample_nodes)
        atomic_write_text(rng_path(self.run_dir, round_, self.subdir),
                          json.dumps(random.getstate()))
        self.checkpoints.append(path)
        clients = [c.partition_id for c in audit.clients]
        losses = [c.train_loss for c in audit.clients]
        weights = [c.num_examples for c in audit.clients]
        record = {
            "round": round_,
            "test_accuracy": acc,
            "test_loss": loss,
            "train_loss": float(np.average(losses, weights=weights)) if losses else None,
            "clients": clients,
            "failures": len(audit.failures),
            "failure_reasons": audit.failures,
            "aggregated": audit.aggregated,
            "note": audit.note,
            **audit.record.entries,
        }
        warning = None
        if not any("warning" in r for r in self.rounds):  # once per run
            warning = chance_level_warning(round_, self.scenario.federation.rounds, acc,
                                           self.data.y[self.data.test], self.scenario.train,
                                           failures=len(audit.failures),
                                           membership=self.scenario.attack.enabled)
        if warning:
            record["warning"] = warning
            log.warning("%s", warning)
            if self.progress is not None:
                self.progress.warn(warning)
        if audit.dp_steps:  # dp-sgd: every reply that declared steps, accepted or rejected
            record["dp_steps"] = {str(k): v for k, v in sorted(audit.dp_steps.items())}
            record["dp_sample_rate"] = {str(k): v for k, v in
                                        sorted(audit.dp_sample_rate.items())}
        append_jsonl(self.jsonl, record)
        self.rounds.append(record)
        if self.progress is not None:
            self.progress.round_done(round_, record)

    def trajectory(self) -> Trajectory:
        """The global models of this training run, for the audit."""
        return Trajectory(tuple(self.checkpoints), self.current)

    def client_gnq(self) -> dict[str, np.ndarray] | None:
        """All rounds' client-side per-sample GNQ (:func:`fedaudit.probes.client_gnq.read_client_gnq`)."""
        return read_client_gnq(self.run_dir, [r["round"] for r in self.rounds], self.subdir)
