"""Server side of a run: federated rounds through the auditing strategy, then the
post-training audit (quantization, r_Qn, attacks) and ``results.json``."""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

import fedaudit
from fedaudit.config import ScenarioError, load_scenario, to_toml
from fedaudit.data import FederatedData, build_federated_data
from fedaudit.health import chance_level_warning
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
    def step(self, name: str, done: int, total: int, info: str = "") -> None: ...


class _NoProgress:
    def round_done(self, round_: int, record: dict) -> None:
        pass

    def phase(self, text: str) -> None:
        log.info(text)

    def step(self, name: str, done: int, total: int, info: str = "") -> None:
        pass


STATEFUL_STRATEGIES = ("FedAvgM", "FedAdagrad", "FedAdam", "FedYogi")


def _train_metrics(records: list, weighted_by_key: str):
    """Weighted mean of the reply metrics except ``partition-id`` (an id, not a metric)
    and the defense's unit weight."""
    from flwr.app import MetricRecord
    from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

    from strategies.defenses import UNIT_WEIGHT_KEY

    agg = aggregate_metricrecords(records, weighted_by_key)
    return MetricRecord({k: v for k, v in agg.items()
                         if k not in ("partition-id", UNIT_WEIGHT_KEY)})


def num_sampled_clients(scenario: dict) -> tuple[int, int]:
    """(min_train_nodes, how many clients FedAvg samples each round) for the scenario's
    ``num_clients`` SuperNodes (flwr's FedAvg.configure_train rule)."""
    fed = scenario["federation"]
    n = fed["num_clients"]
    min_train = max(1, min(n, round(fed["fraction_train"] * n)))
    return min_train, max(int(n * fed["fraction_train"]), min_train)


def make_strategy(scenario: dict, seed: int | None = None):
    """The scenario's Flower strategy (by name), federated evaluation off: the auditing
    wrapper evaluates the global model centrally on ``test``.

    With ``defense.kind`` = dp-server / dp-client / clip the strategy comes wrapped in
    Flower's fixed-clipping DP wrapper (:func:`strategies.defenses.wrap_defense`; noise
    seeded from ``seed``, default the scenario seed) and aggregates with uniform client
    weights (the ``dp-weight`` metric every client then sends as 1): the noise std
    noise_multiplier * clip_norm / m is calibrated to the uniform mean of m clipped updates.
    """
    import flwr.serverapp.strategy as flwr_strategies

    from strategies.defenses import UNIT_WEIGHT_KEY, WRAPPED_KINDS, wrap_defense

    fed = scenario["federation"]
    defense = scenario["defense"]
    cls = getattr(flwr_strategies, fed["strategy"])
    n = fed["num_clients"]
    min_train, sampled = num_sampled_clients(scenario)
    weighted = UNIT_WEIGHT_KEY if defense["kind"] in WRAPPED_KINDS else "num-examples"
    base = cls(fraction_train=fed["fraction_train"], fraction_evaluate=0.0,
               min_train_nodes=min_train, min_evaluate_nodes=0, min_available_nodes=n,
               weighted_by_key=weighted, train_metrics_aggr_fn=_train_metrics)
    return wrap_defense(base, defense, num_clients=n, num_sampled=sampled,
                        seed=scenario["scenario"]["seed"] if seed is None else seed)


class RunRecorder:
    """Receives every round from the strategy: evaluates, checkpoints, logs, records.

    Each finished round is durable before the next starts: the checkpoint, the client-side
    GNQ of the round (``gnq/round-NNNN.npz``) and the server's RNG state are written
    atomically, then the round's line is appended to the jsonl file -- a round counts as
    finished exactly when its line is there.  :meth:`resume_point` reads that back.
    """

    def __init__(self, scenario: dict, data: FederatedData, run_dir: Path,
                 device: torch.device, progress: Progress | None, *, train_seed: int,
                 subdir: str = "") -> None:
        self.scenario, self.data, self.run_dir = scenario, data, run_dir
        self.device, self.progress, self.train_seed = device, progress, train_seed
        self.ckpt_dir = run_dir / "checkpoints" / subdir if subdir else run_dir / "checkpoints"
        self.gnq_dir = run_dir / "gnq" / subdir if subdir else run_dir / "gnq"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl = run_dir / (f"rounds-{subdir}.jsonl" if subdir else "rounds.jsonl")
        self.model = model_for(scenario, data, seed=train_seed)
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
            if not (self.ckpt_dir / checkpoint_path(self.run_dir, rec["round"]).name).exists():
                break
            done.append(rec)
        # rewrite the log without a torn or orphan tail, so appends continue cleanly
        atomic_write_text(self.jsonl, "".join(json.dumps(r) + "\n" for r in done))
        self.rounds = done
        self.checkpoints = [self.ckpt_dir / checkpoint_path(self.run_dir, r["round"]).name
                            for r in done]
        if done:
            self.current = load_checkpoint(self.checkpoints[-1])
            rng = self.ckpt_dir / f"rng-{len(done):04d}.json"
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
        path = self.ckpt_dir / checkpoint_path(self.run_dir, round_).name
        atomic_torch_save(self.current, path)
        # Python's RNG picks the clients of the next round (flwr's sample_nodes)
        atomic_write_text(self.ckpt_dir / f"rng-{round_:04d}.json", json.dumps(random.getstate()))
        self._save_client_gnq(round_, audit)
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
        warning = None
        if not any("warning" in r for r in self.rounds):  # once per run
            warning = chance_level_warning(round_, self.scenario["federation"]["rounds"], acc,
                                           self.data.y[self.data.test], self.scenario["train"],
                                           failures=len(audit.failures))
        if warning:
            record["warning"] = warning
            log.warning("%s", warning)
            if self.progress is not None and hasattr(self.progress, "warn"):
                self.progress.warn(warning)
        if audit.dp_steps:  # dp-sgd: every reply that declared steps, accepted or rejected
            record["dp_steps"] = {str(k): v for k, v in sorted(audit.dp_steps.items())}
            record["dp_sample_rate"] = {str(k): v for k, v in
                                        sorted(audit.dp_sample_rate.items())}
        append_jsonl(self.jsonl, record)
        self.rounds.append(record)
        if self.progress is not None:
            self.progress.round_done(round_, record)

    def _save_client_gnq(self, round_: int, audit: RoundAudit) -> None:
        parts = [c for c in audit.clients if c.gnq_ids is not None and len(c.gnq_ids)]
        if not parts:
            return
        self.gnq_dir.mkdir(parents=True, exist_ok=True)
        epochs = [c.gnq_epochs if c.gnq_epochs is not None and len(c.gnq_epochs) == len(c.gnq_ids)
                  else np.zeros(len(c.gnq_ids), np.int64) for c in parts]  # 0: not reported
        atomic_save_npz(self.gnq_dir / f"round-{round_:04d}.npz",
                        sample_id=np.concatenate([c.gnq_ids for c in parts]).astype(np.int64),
                        client=np.concatenate([np.full(len(c.gnq_ids), c.partition_id)
                                               for c in parts]),
                        epoch=np.concatenate(epochs).astype(np.int64),
                        score=np.concatenate([c.gnq_scores for c in parts]).astype(np.float64))

    def client_gnq(self) -> dict[str, np.ndarray] | None:
        """All rounds' client-side per-sample GNQ (gnq_samples.npz layout, no canary): one
        row per time a sample was scored -- each local epoch (under DP-SGD's Poisson
        sampling, each time it was drawn) -- with its 1-based local ``epoch``."""
        cols: dict[str, list] = {"sample_id": [], "client": [], "round": [], "epoch": [],
                                 "score": []}
        for rec in self.rounds:
            path = self.gnq_dir / f"round-{rec['round']:04d}.npz"
            if not path.exists():
                continue
            with np.load(path) as npz:
                for key in ("sample_id", "client", "score"):
                    cols[key].append(npz[key])
                cols["round"].append(np.full(len(npz["score"]), rec["round"]))
                cols["epoch"].append(npz["epoch"] if "epoch" in npz.files
                                     else np.zeros(len(npz["score"]), np.int64))
        if not cols["score"]:
            return None
        return {k: np.concatenate(v) for k, v in cols.items()}


def train_federation(grid: Grid, scenario: dict, data: FederatedData, run_dir: Path,
                     device: torch.device, progress: Progress | None, *, train_seed: int,
                     subdir: str = "", resume: bool = False) -> RunRecorder:
    """All rounds of one federated training run (the remaining ones when resuming)."""
    recorder = RunRecorder(scenario, data, run_dir, device, progress, train_seed=train_seed,
                           subdir=subdir)
    done = recorder.resume_point() if resume else 0
    rounds = scenario["federation"]["rounds"]
    if progress is not None and done:
        for rec in recorder.rounds:
            progress.round_done(rec["round"], rec)
    if done >= rounds:
        return recorder
    gnq = scenario["audit.gnq"]
    strategy = AuditingStrategy(make_strategy(scenario, seed=train_seed), on_round=recorder,
                                gnq_server=gnq if gnq["server"] else None,
                                min_clients=scenario["federation"]["min_clients"],
                                round_offset=done)
    strategy.start(grid=grid, initial_arrays=ArrayRecord(recorder.current),
                   num_rounds=rounds - done,
                   timeout=scenario["federation"]["timeout"],
                   train_config=ConfigRecord({"scenario": to_toml(scenario),
                                              "train-seed": train_seed}))
    spent = getattr(strategy.strategy, "privacy_spent", lambda: None)()
    if spent is not None:  # Flower's live accountant (this start() only; not resumed rounds)
        recorder.live_privacy = {"epsilon": spent.epsilon, "delta": spent.delta,
                                 "releases": spent.num_releases, "resumed_from_round": done}
    return recorder


def wait_for_nodes(grid: Grid, wanted: int, timeout: float = 60.0) -> None:
    """Fail clearly (instead of waiting forever in flwr's sampler) when the federation has
    fewer SuperNodes than the scenario has clients."""
    deadline = time.monotonic() + timeout
    while (have := len(list(grid.get_node_ids()))) < wanted:
        if time.monotonic() > deadline:
            raise ScenarioError(
                f"federation.num_clients = {wanted}, but only {have} SuperNodes connected "
                f"within {timeout:.0f} s; start more SuperNodes (simulation: flwr federation "
                f"simulation-config ... --num-supernodes {wanted})")
        time.sleep(0.5)


def execute(grid: Grid, scenario: dict, run_dir: Path, progress: Progress | None = None,
            *, resume: bool = False) -> dict:
    """Run the whole scenario on ``grid``; return the results (also written to disk).
    With ``resume`` continue after the last finished round found in ``run_dir``."""
    progress = progress or _NoProgress()
    t0 = time.perf_counter()
    seed = scenario["scenario"]["seed"]
    torch.manual_seed(seed)
    random.seed(seed)
    data = build_federated_data(scenario)
    device = pick_device(scenario["train"]["device"])
    wait_for_nodes(grid, scenario["federation"]["num_clients"])
    recorder = train_federation(grid, scenario, data, run_dir, device, progress,
                                train_seed=seed, resume=resume)
    extra: list[RunRecorder] = []
    quant = scenario["audit.quantization"]
    if quant["enabled"]:
        for s in quant["seeds"]:
            if s == seed:
                continue
            progress.phase(f"extra trajectory, training seed {s}")
            random.seed(s)
            extra.append(train_federation(grid, scenario, data, run_dir, device, None,
                                          train_seed=s, subdir=f"seed-{s}", resume=resume))
    t_train = time.perf_counter() - t0

    results = assemble_results(scenario, data, recorder, run_dir)
    add_defense_results(results, scenario, recorder, n_extra=len(extra))
    from fedaudit.posttrain import post_training

    timing = post_training(scenario, data, recorder, extra, run_dir, results, device, progress)
    results["timing"] = {"total_seconds": time.perf_counter() - t0, "train_seconds": t_train,
                         **timing}
    if resume:
        results["timing"]["resumed"] = True
    atomic_write_json(run_dir / "results.json", results)
    progress.phase("done")
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
    samples = recorder.client_gnq()  # client-side per-sample GNQ, all rounds
    if samples is not None:
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
        "warnings": [{"round": r["round"], "message": r["warning"]}
                     for r in recorder.rounds if r.get("warning")],
    }
    if samples is not None and data.canary.any():
        results["canaries"] = canary_ranks(samples)
    return results


def add_defense_results(results: dict, scenario: dict, recorder: RunRecorder, *,
                        n_extra: int = 0) -> None:
    """results.json ``defense`` (:func:`fedaudit.privacy.defense_summary`: kind,
    parameters, epsilon, delta, accounting, notes) and, under dp-sgd, each client's
    ``dp`` entry (epsilon, steps, sample rate).  Epsilon is computed from rounds.jsonl, so a
    resumed run accounts its earlier rounds too."""
    from fedaudit.privacy import defense_summary

    summary = defense_summary(scenario, recorder.rounds,
                              num_sampled=num_sampled_clients(scenario)[1],
                              extra_trajectories=n_extra)
    live = recorder.live_privacy
    if live is not None:
        summary["flower_accountant"] = live
        if not live["resumed_from_round"] and isinstance(summary.get("epsilon"), float) \
                and abs(live["epsilon"] - summary["epsilon"]) > 1e-9 * max(1.0, live["epsilon"]):
            log.warning("Flower's live accountant says epsilon = %s, the rounds say %s",
                        live["epsilon"], summary["epsilon"])
    results["defense"] = summary
    if "epsilon_per_client" in summary:
        for c, client in enumerate(results["clients"]):
            client["dp"] = {"epsilon": summary["epsilon_per_client"][c],
                            "steps": summary["steps_per_client"][c],
                            "sample_rate": summary["sample_rate_per_client"][c]}


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
    """ServerApp for ``flwr run .`` (and ``fedaudit deploy``): the scenario, ``--set``
    overrides (``;``-separated) and output folder come from the run config
    (``[tool.flwr.app.config]`` or ``--run-config``).  The scenario and the SuperNode count
    are checked before the run directory is created, so a failed start leaves nothing; the
    run directory is printed as an absolute path and gets its report.html."""
    from fedaudit.preflight import check_scenario
    from fedaudit.simulation.runner import run_logging

    cfg = context.run_config
    overrides = [s for s in str(cfg.get("set", "")).split(";") if s.strip()]
    scenario = check_scenario(load_scenario(str(cfg.get("scenario", "quickstart")), overrides))
    wait_for_nodes(grid, scenario["federation"]["num_clients"])
    run_dir = create_run_dir(str(cfg.get("out", "runs")), scenario["scenario"]["name"]).resolve()
    atomic_write_text(run_dir / "scenario.toml", to_toml(scenario))
    with run_logging(run_dir, verbose=True):
        execute(grid, scenario, run_dir)
    from fedaudit.report import write_report

    try:
        write_report(run_dir)
    except Exception as exc:  # noqa: BLE001 - the run directory itself is complete
        log.warning("report not written (%s: %s); retry with: fedaudit report %s",
                    type(exc).__name__, exc, run_dir)
    print(run_dir, flush=True)
