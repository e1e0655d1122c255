"""Server side of a run: federated rounds through the auditing strategy, then the
post-training audit (quantization, r_Qn, attacks) and ``results.json``."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

import fedaudit
from fedaudit.config import load_scenario, to_toml
from fedaudit.data import FederatedData, build_federated_data
from fedaudit.models import model_for
from fedaudit.rundir import (append_jsonl, atomic_save_npz, atomic_torch_save,
                             atomic_write_json, atomic_write_text, checkpoint_path,
                             create_run_dir)
from fedaudit.training import evaluate, pick_device
from strategies.auditing import AuditingStrategy, RoundAudit

log = logging.getLogger("fedaudit")


class Progress(Protocol):
    def round_done(self, round_: int, record: dict) -> None: ...
    def phase(self, text: str) -> None: ...


class _NoProgress:
    def round_done(self, round_: int, record: dict) -> None:
        pass

    def phase(self, text: str) -> None:
        log.info(text)


def make_strategy(scenario: dict):
    """The scenario's Flower strategy (by name), federated evaluation off: the auditing
    wrapper evaluates the global model centrally on ``test``."""
    import flwr.serverapp.strategy as flwr_strategies

    fed = scenario["federation"]
    cls = getattr(flwr_strategies, fed["strategy"])
    n = fed["num_clients"]
    return cls(fraction_train=fed["fraction_train"], fraction_evaluate=0.0,
               min_train_nodes=max(1, min(n, round(fed["fraction_train"] * n))),
               min_evaluate_nodes=0, min_available_nodes=n)


class RunRecorder:
    """Receives every round from the strategy: evaluates, checkpoints, logs, records."""

    def __init__(self, scenario: dict, data: FederatedData, run_dir: Path,
                 device: torch.device, progress: Progress | None, *, train_seed: int,
                 subdir: str = "") -> None:
        self.scenario, self.data, self.run_dir = scenario, data, run_dir
        self.device, self.progress, self.train_seed = device, progress, train_seed
        self.ckpt_dir = run_dir / "checkpoints" / subdir if subdir else run_dir / "checkpoints"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl = run_dir / (f"rounds-{subdir}.jsonl" if subdir else "rounds.jsonl")
        self.model = model_for(scenario, data, seed=train_seed)
        self.rounds: list[dict] = []
        self.audits: list[RoundAudit] = []
        self.checkpoints: list[Path] = []
        self.current: dict[str, torch.Tensor] = {k: v.clone() for k, v in
                                                 self.model.state_dict().items()}

    def __call__(self, round_: int, arrays: ArrayRecord | None, audit: RoundAudit) -> None:
        if arrays is not None:
            self.current = arrays.to_torch_state_dict()
        self.model.load_state_dict(self.current)
        acc, loss = evaluate(self.model, self.data.x[self.data.test], self.data.y[self.data.test],
                             device=self.device)
        path = self.ckpt_dir / checkpoint_path(self.run_dir, round_).name
        atomic_torch_save(self.current, path)
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
            "gnq_update": {str(c.partition_id): c.gnq_update for c in audit.clients
                           if c.gnq_update is not None},
            "update_norm": {str(c.partition_id): c.update_norm for c in audit.clients},
        }
        append_jsonl(self.jsonl, record)
        self.rounds.append(record)
        self.audits.append(audit)
        if self.progress is not None:
            self.progress.round_done(round_, record)


def train_federation(grid: Grid, scenario: dict, data: FederatedData, run_dir: Path,
                     device: torch.device, progress: Progress | None, *, train_seed: int,
                     subdir: str = "") -> RunRecorder:
    """All rounds of one federated training run; returns its recorder (trajectory)."""
    recorder = RunRecorder(scenario, data, run_dir, device, progress, train_seed=train_seed,
                           subdir=subdir)
    gnq = scenario["audit.gnq"]
    strategy = AuditingStrategy(make_strategy(scenario), on_round=recorder,
                                gnq_server=gnq if gnq["server"] else None,
                                min_clients=scenario["federation"]["min_clients"])
    strategy.start(grid=grid, initial_arrays=ArrayRecord(recorder.model.state_dict()),
                   num_rounds=scenario["federation"]["rounds"],
                   timeout=scenario["federation"]["timeout"],
                   train_config=ConfigRecord({"scenario": to_toml(scenario),
                                              "train-seed": train_seed}))
    return recorder


def execute(grid: Grid, scenario: dict, run_dir: Path, progress: Progress | None = None) -> dict:
    """Run the whole scenario on ``grid``; return the results (also written to disk)."""
    progress = progress or _NoProgress()
    t0 = time.perf_counter()
    seed = scenario["scenario"]["seed"]
    torch.manual_seed(seed)
    data = build_federated_data(scenario)
    device = pick_device(scenario["train"]["device"])
    recorder = train_federation(grid, scenario, data, run_dir, device, progress, train_seed=seed)
    extra: list[RunRecorder] = []
    quant = scenario["audit.quantization"]
    if quant["enabled"]:
        for s in quant["seeds"]:
            if s == seed:
                continue
            progress.phase(f"extra trajectory, training seed {s}")
            extra.append(train_federation(grid, scenario, data, run_dir, device, None,
                                          train_seed=s, subdir=f"seed-{s}"))
    t_train = time.perf_counter() - t0

    results = assemble_results(scenario, data, recorder, run_dir)
    from fedaudit.posttrain import post_training

    timing = post_training(scenario, data, recorder, extra, run_dir, results, device, progress)
    results["timing"] = {"total_seconds": time.perf_counter() - t0, "train_seconds": t_train,
                         **timing}
    atomic_write_json(run_dir / "results.json", results)
    return results


def assemble_results(scenario: dict, data: FederatedData, recorder: RunRecorder,
                     run_dir: Path) -> dict[str, Any]:
    """results.json up to the post-training sections; writes gnq_samples.npz."""
    last = recorder.rounds[-1]
    n_clients = scenario["federation"]["num_clients"]
    clients: list[dict[str, Any]] = []
    per_round = {c: [] for c in range(n_clients)}
    for rec in recorder.rounds:
        for c in range(n_clients):
            per_round[c].append(rec["gnq_update"].get(str(c)))
    # client-side per-sample GNQ, pooled over rounds
    sid, cl, rd, sc = [], [], [], []
    for audit in recorder.audits:
        for c in audit.clients:
            if c.gnq_ids is not None and len(c.gnq_ids):
                sid.append(c.gnq_ids)
                cl.append(np.full(len(c.gnq_ids), c.partition_id))
                rd.append(np.full(len(c.gnq_ids), audit.round))
                sc.append(c.gnq_scores)
    samples = None
    if sid:
        samples = {"sample_id": np.concatenate(sid).astype(np.int64),
                   "client": np.concatenate(cl).astype(np.int64),
                   "round": np.concatenate(rd).astype(np.int64),
                   "score": np.concatenate(sc).astype(np.float64)}
        samples["canary"] = data.canary[samples["sample_id"]]
        atomic_save_npz(run_dir / "gnq_samples.npz", **samples)
    for c in range(n_clients):
        ups = per_round[c]
        gnq: dict[str, Any] = {"update_per_round": ups,
                               "update_total": float(sum(u for u in ups if u is not None))
                               if any(u is not None for u in ups) else None}
        if samples is not None:
            mine = samples["score"][samples["client"] == c]
            gnq["sample_mean"] = float(mine.mean()) if len(mine) else None
            gnq["sample_max"] = float(mine.max()) if len(mine) else None
        labels = np.bincount(data.y[data.clients[c]], minlength=data.num_classes)
        clients.append({"client": c, "num_examples": int(len(data.clients[c])),
                        "label_histogram": labels.tolist(), "gnq": gnq, "attacks": {}})
    results: dict[str, Any] = {
        "fedaudit_version": fedaudit.__version__,
        "seed": scenario["scenario"]["seed"],
        "scenario": scenario,
        "run_dir": str(run_dir),
        "data": {"dataset": data.name, "num_samples": int(len(data.y)),
                 "train": int(len(data.train)), "holdout": int(len(data.holdout)),
                 "test": int(len(data.test)), "shape": list(data.x.shape[1:]),
                 "num_classes": data.num_classes, "canaries": int(data.canary.sum())},
        "model": {"test_accuracy": last["test_accuracy"], "test_loss": last["test_loss"]},
        "rounds": [{k: r[k] for k in ("round", "test_accuracy", "test_loss", "train_loss",
                                       "clients", "failures", "aggregated", "note")}
                   for r in recorder.rounds],
        "clients": clients,
    }
    if samples is not None and data.canary.any():
        results["canaries"] = canary_ranks(samples)
    return results


def canary_ranks(samples: dict[str, np.ndarray]) -> dict[str, Any]:
    """Percentile rank of each canary's mean GNQ (over rounds) among its client's samples
    (100 = the most unique sample of that client)."""
    from scipy.stats import percentileofscore

    out = []
    for c in np.unique(samples["client"][samples["canary"]]):
        mask = samples["client"] == c
        ids = samples["sample_id"][mask]
        uniq, inv = np.unique(ids, return_inverse=True)
        mean = np.bincount(inv, weights=samples["score"][mask]) / np.bincount(inv)
        canary = samples["canary"][mask]
        is_canary = np.zeros(len(uniq), dtype=bool)
        is_canary[inv[canary]] = True
        for sid, m in zip(uniq[is_canary], mean[is_canary]):
            out.append({"sample_id": int(sid), "client": int(c), "gnq_mean": float(m),
                        "percentile": float(percentileofscore(mean, m, kind="weak"))})
    pct = [o["percentile"] for o in out]
    return {"samples": out, "mean_percentile": float(np.mean(pct)) if pct else None}


# ---- `flwr run .` entry point -------------------------------------------------------
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """ServerApp for ``flwr run .``: the scenario and output folder come from the run
    config (``[tool.flwr.app.config]`` or ``--run-config``)."""
    cfg = context.run_config
    overrides = [s for s in str(cfg.get("set", "")).split(";") if s.strip()]
    scenario = load_scenario(str(cfg.get("scenario", "quickstart")), overrides)
    run_dir = create_run_dir(str(cfg.get("out", "runs")), scenario["scenario"]["name"])
    atomic_write_text(run_dir / "scenario.toml", to_toml(scenario))
    execute(grid, scenario, run_dir)
    print(run_dir)
