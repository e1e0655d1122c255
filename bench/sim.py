"""Simulation benchmarks: Flower + Ray against a plain torch loop, and scaling.

* :func:`plain_fedavg` -- the scenario's FedAvg rounds as a sequential torch loop in this
  process: same data (``build_federated_data``), same ``train_local``, same per-client
  seeds (``client_seed``), replies sorted by partition id and averaged exactly as Flower's
  ``aggregate_arrayrecords`` does (float32, weights = num_examples / total), the global
  model evaluated on ``test`` after each round as the server does.
* :func:`sim_run` -- one ``runner.run`` in a fresh Python process (Ray starts and stops
  with it), watched from outside: wall time of the call, ``timing.train_seconds``, and
  memory of the whole process tree (see :class:`TreeMemory`).
* :func:`sim_overhead` -- medians of both, at several sizes: simulation / plain with and
  without Ray's start-up.
* :func:`scaling` -- wall time and peak memory of whole runs as clients or rounds grow.

Each simulated run lives in its own interpreter because Flower's Ray backend calls
``ray.init`` once per process and ``ray.shutdown`` at the end; a fresh process also keeps
this process's memory (torch, the GNQ benchmarks) out of the measurement.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AUDIT_OFF = ["audit.gnq.client=false", "audit.gnq.server=false",
             "audit.quantization.enabled=false", "attack.enabled=false", "canaries.count=0"]


# ---- memory of a process tree (Linux /proc; psutil is not a dependency) ---------------

def _children_map() -> dict[int, list[int]]:
    """ppid -> [pid] for every process visible in /proc."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name (field 2) may hold spaces and parentheses: split after the last ')'
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (children, grandchildren, ...)."""
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _kib(path: str, keys: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                name = line.split(":", 1)[0]
                if name in keys:
                    out[name] = int(line.split()[1])
    except OSError:
        pass
    return out


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
    except OSError:
        return "?"
    name = os.path.basename(parts[0].decode(errors="replace")) if parts and parts[0] else "?"
    if name.startswith("python") and len(parts) > 1:  # python -m x / python path/script.py
        if parts[1] == b"-c":
            return "driver (python -c)"
        rest = [p.decode(errors="replace") for p in parts[1:] if p]
        name = next((os.path.basename(r) for r in rest if not r.startswith("-")), name)
    name = name.split()[0] if name.strip() else "?"
    return name.removesuffix(".run")[:40]  # ray::ClientAppActor.run -> ray::ClientAppActor


class TreeMemory:
    """Samples the memory of a process and all its descendants in a background thread.

    Every ``interval`` seconds it sums, over the tree, ``Pss`` from
    ``/proc/PID/smaps_rollup`` (proportional set size: a page shared by n processes counts
    1/n in each, so Ray's shared-memory object store and shared libraries are not counted
    once per process) and ``VmRSS`` from ``/proc/PID/status`` (counts shared pages once
    per process, an over-estimate). The peaks are of the samples, so a spike shorter than
    the interval can be missed: they are lower bounds of the true peaks.
    """

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid, self.interval = pid, interval
        self.peak_pss_kib = self.peak_rss_kib = 0
        self.peak_procs = 0
        self.max_pss_by_proc: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        pss = rss = 0
        pids = descendants(self.pid)
        for p in pids:
            r = _kib(f"/proc/{p}/status", ("VmRSS",)).get("VmRSS", 0)
            s = _kib(f"/proc/{p}/smaps_rollup", ("Pss",)).get("Pss", 0)
            rss += r
            pss += s
            if s:
                name = _cmd(p)
                self.max_pss_by_proc[name] = max(self.max_pss_by_proc.get(name, 0), s)
        self.peak_pss_kib = max(self.peak_pss_kib, pss)
        self.peak_rss_kib = max(self.peak_rss_kib, rss)
        self.peak_procs = max(self.peak_procs, len(pids))
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


_STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "


def round_phases(log_text: str) -> dict:
    """Per-round timing read back from a run's ``run.log`` (Flower's own log lines).

    ``client phase``: from ``[ROUND k/n]`` to ``aggregate_train: Received ...`` (messages
    out, ClientApps on the Ray actors, replies back); ``server phase``: from there to the
    next ``[ROUND`` / ``Strategy execution finished`` (aggregation, the auditing
    strategy's checks, evaluation on ``test``, checkpoint and rounds.jsonl writes).
    Returns the first round's duration (includes the actors' start-up: each imports torch
    and fedaudit and rebuilds the data) and the medians of rounds 2..n (log resolution 1 ms).
    """
    import re
    from datetime import datetime

    events = []
    for line in log_text.splitlines():
        m = re.match(_STAMP, line)
        if not m:
            continue
        kind = ("start" if "[ROUND " in line else "received" if "aggregate_train: Received" in line
                else "end" if "Strategy execution finished" in line else None)
        if kind:
            events.append((kind, datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")))
    rounds = []  # (client seconds, server seconds)
    for i, (kind, t) in enumerate(events):
        if kind != "start":
            continue
        rec = next((u for k, u in events[i + 1:] if k == "received"), None)
        nxt = next((u for k, u in events[i + 1:] if k in ("start", "end")), None)
        if rec is None or nxt is None or rec > nxt:
            continue
        rounds.append(((rec - t).total_seconds(), (nxt - rec).total_seconds()))
    if not rounds:
        return {}
    later = rounds[1:] or rounds
    return {"round1_seconds": sum(rounds[0]),
            "round_seconds": statistics.median(c + s for c, s in later),
            "round_client_seconds": statistics.median(c for c, _ in later),
            "round_server_seconds": statistics.median(s for _, s in later),
            "rounds_logged": len(rounds)}


# ---- a simulated run in a fresh process -----------------------------------------------

_CHILD = r"""
import json, os, sys, time
t_start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from fedaudit.config import load_scenario
from fedaudit.simulation import runner
overrides = json.loads(sys.argv[3])
scenario = load_scenario(sys.argv[4], overrides)
t0 = time.perf_counter()
run_dir, results = runner.run(scenario, sys.argv[2])
t1 = time.perf_counter()
def kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
ckpt = sum(p.stat().st_size for p in (run_dir / "checkpoints").rglob("*.pt"))
from bench.sim import round_phases
print("BENCH " + json.dumps({
    **round_phases((run_dir / "run.log").read_text(errors="replace")),
    "call_seconds": t1 - t0, "import_seconds": t0 - t_start,
    "train_seconds": results["timing"]["train_seconds"],
    "total_seconds": results["timing"]["total_seconds"],
    "test_accuracy": results["model"]["test_accuracy"],
    "driver_peak_rss_MiB": kib("VmHWM") / 1024,
    "checkpoints_MiB": ckpt / 2**20,
    "run_dir_MiB": sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file()) / 2**20,
}))
"""


def sim_run(overrides: list[str], *, out: str | None = None, timeout: float = 1800,
            interval: float = 0.5, scenario: str = "quickstart") -> dict:
    """One ``runner.run(load_scenario(scenario, overrides))`` in a fresh interpreter (a
    bundled name or a path).

    Returns the child's own figures (``call_seconds``: the whole ``runner.run`` call, Ray
    start-up and shut-down included; ``train_seconds``: ``results["timing"]``, from the
    ServerApp's start to the end of the last round; the driver's peak RSS ``VmHWM``; bytes
    of checkpoints) plus ``process_seconds`` (the whole interpreter, imports included) and
    the tree's sampled peak PSS / RSS (driver, Ray's GCS, raylet, workers and agents).
    """
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", RAY_DEDUP_LOGS="0")
    env.pop("RAY_ADDRESS", None)  # always a fresh local Ray, never a cluster left around
    with tempfile.TemporaryDirectory(prefix="fedaudit-bench-") as tmp:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(ROOT), out or tmp,
                                 json.dumps(overrides), str(scenario)], cwd=tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with TreeMemory(proc.pid, interval) as mem:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise
        wall = time.perf_counter() - t0
    lines = [ln for ln in stdout.splitlines() if ln.startswith("BENCH ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"simulated run failed (exit {proc.returncode}):\n{stderr[-3000:]}")
    res = json.loads(lines[-1][6:])
    res.update(process_seconds=wall, tree_peak_pss_MiB=mem.peak_pss_kib / 1024,
               tree_peak_rss_MiB=mem.peak_rss_kib / 1024, tree_peak_processes=mem.peak_procs,
               memory_samples=mem.samples,
               top_processes_pss_MiB={k: round(v / 1024, 1) for k, v in sorted(
                   mem.max_pss_by_proc.items(), key=lambda kv: -kv[1])[:6]})
    return res


# ---- the same rounds without Flower and Ray --------------------------------------------

def plain_fedavg(overrides: list[str], *, threads: int | None = None) -> dict:
    """The scenario's FedAvg rounds as a plain sequential loop in this process.

    ``threads``: torch intra-op threads during the loop (default: the scenario's
    ``client_resources.num_cpus``, which is what each ClientApp sets for itself); restored
    afterwards. Returns the wall time of the rounds (data preparation excluded; it is
    cached after the first call) and the final test accuracy, which matches the
    simulation's when the thread count does.
    """
    import torch

    from fedaudit.config import load_scenario
    from fedaudit.data import build_federated_data
    from fedaudit.models import model_for
    from fedaudit.training import client_seed
    from fedaudit.training import evaluate, pick_device, train_local

    scenario = load_scenario("quickstart", overrides)
    seed = scenario.seed
    data = build_federated_data(scenario)
    device = pick_device(scenario.train.device)
    n_clients = scenario.federation.num_clients
    if (scenario.federation.fraction_train < 1.0
            or scenario.federation.strategy != "FedAvg"
            or scenario.defense.kind != "none"):
        raise ValueError("plain_fedavg reproduces plain FedAvg (every client each round, no "
                         "defense) only")
    gnq = scenario.audit.gnq
    saved = torch.get_num_threads()
    torch.set_num_threads(threads or max(1, int(scenario.federation.client_resources.num_cpus)))
    try:
        t0 = time.perf_counter()
        global_model = model_for(scenario.model, data, seed=seed)
        global_state = {k: v.clone() for k, v in global_model.state_dict().items()}
        acc = loss = float("nan")
        round_times = []
        for rnd in range(1, scenario.federation.rounds + 1):
            t_round = time.perf_counter()
            states, weights = [], []
            for pid in range(n_clients):
                cs = client_seed(seed, rnd, pid)
                torch.manual_seed(cs)
                model = model_for(scenario.model, data, seed=seed)
                model.load_state_dict(global_state)
                res = train_local(model, data.x, data.y, data.clients[pid], scenario.train,
                                  seed=cs, device=device, gnq=gnq if gnq.client else None)
                states.append({k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
                weights.append(res.num_examples)
            total = float(sum(weights))
            agg: dict[str, np.ndarray] = {}
            for state, w in zip(states, weights):  # as flwr's aggregate_arrayrecords
                for k, v in state.items():
                    agg[k] = v * (w / total) if k not in agg else agg[k] + v * (w / total)
            global_state = {k: torch.from_numpy(np.asarray(v)) for k, v in agg.items()}
            global_model.load_state_dict(global_state)
            acc, loss = evaluate(global_model, data.x[data.test], data.y[data.test], device=device)
            round_times.append(time.perf_counter() - t_round)
        seconds = time.perf_counter() - t0
    finally:
        torch.set_num_threads(saved)
    return {"seconds": seconds, "round_seconds": statistics.median(round_times),
            "test_accuracy": acc, "test_loss": loss,
            "threads": threads or int(scenario.federation.client_resources.num_cpus)}


def _median_dict(runs: list[dict], keys: tuple[str, ...]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def sim_overhead(sizes: dict[str, list[str]], repeats: int = 3, plain_repeats: int = 3) -> list[dict]:
    """Simulation / plain-loop time ratios at several sizes (audit and attacks off).

    For every size: ``repeats`` simulated runs (fresh process each) and ``plain_repeats``
    plain loops, interleaved; medians. Ratios:

    * ``ratio_train`` = median ``train_seconds`` / median plain seconds: Ray already up,
      but the actors' start-up in round 1 included (each imports torch and fedaudit and
      rebuilds the data), plus Flower's messaging, actor scheduling, serialisation and the
      server's per-round work (evaluation, checkpoint and jsonl writes; the plain loop
      evaluates too but writes nothing);
    * ``ratio_call`` = median whole ``runner.run`` call / plain (Ray's ``ray.init`` and
      ``ray.shutdown`` included);
    * ``ratio_round`` = median steady round of the simulation (rounds 2..n, from run.log) /
      median round of the plain loop: the cost once every start-up is paid;
      ``client_round_overhead_ms`` = 1000 x (that steady round - the plain round) / number
      of clients: the fixed cost of one client-round (messaging, actor scheduling,
      (de)serialisation, the ClientApp's own set-up) beyond the same training;
    * ``fixed_seconds`` = call - rounds x steady round: the one-off start-up cost, and
      ``rounds_to_amortise`` = fixed_seconds / steady round: from that many rounds on,
      start-up is less than half of the call.
    """
    rows = []
    for name, extra in sizes.items():
        overrides = AUDIT_OFF + extra
        plain_fedavg(overrides)  # warm-up: data preparation (cached), imports, allocator
        sims, plains = [], []
        for i in range(max(repeats, plain_repeats)):
            if i < repeats:
                sims.append(sim_run(overrides))
            if i < plain_repeats:
                plains.append(plain_fedavg(overrides))
        s = _median_dict(sims, ("call_seconds", "train_seconds", "process_seconds",
                                "test_accuracy", "round_seconds", "round1_seconds",
                                "round_client_seconds", "round_server_seconds"))
        p = _median_dict(plains, ("seconds", "round_seconds", "test_accuracy"))
        n_rounds = sims[0]["rounds_logged"]
        from fedaudit.config import load_scenario

        clients = load_scenario("quickstart", overrides).federation.num_clients
        fixed = s["call_seconds"] - n_rounds * s["round_seconds"]
        rows.append({
            "size": name, "overrides": extra, "rounds": n_rounds,
            "repeats_sim": repeats, "repeats_plain": plain_repeats,
            "plain_seconds": p["seconds"], "sim_train_seconds": s["train_seconds"],
            "sim_call_seconds": s["call_seconds"], "sim_process_seconds": s["process_seconds"],
            "ratio_train": s["train_seconds"] / p["seconds"],
            "ratio_call": s["call_seconds"] / p["seconds"],
            "ray_init_shutdown_seconds": s["call_seconds"] - s["train_seconds"],
            "sim_round1_seconds": s["round1_seconds"], "sim_round_seconds": s["round_seconds"],
            "sim_round_client_seconds": s["round_client_seconds"],
            "sim_round_server_seconds": s["round_server_seconds"],
            "plain_round_seconds": p["round_seconds"],
            "ratio_round": s["round_seconds"] / p["round_seconds"],
            "clients": clients,
            "client_round_overhead_ms":
                1e3 * (s["round_seconds"] - p["round_seconds"]) / clients,
            "fixed_seconds": fixed, "rounds_to_amortise": fixed / s["round_seconds"],
            "acc_sim": s["test_accuracy"], "acc_plain": p["test_accuracy"],
            "plain_threads": plains[0]["threads"],
        })
    return rows


def scaling(grid: list[tuple[str, list[str]]], *, audit: bool = True) -> list[dict]:
    """Wall time and peak memory of whole runs (one fresh process each, one repeat).

    ``audit=True``: the quickstart scenario as shipped (client and server GNQ, PTQ with
    r_Qn, every attack, canaries); ``False``: the ``AUDIT_OFF`` overrides.
    """
    rows = []
    for name, extra in grid:
        r = sim_run(([] if audit else AUDIT_OFF) + extra)
        rows.append({"point": name, "audit": audit, "overrides": extra, **{
            k: r[k] for k in ("process_seconds", "call_seconds", "train_seconds",
                              "driver_peak_rss_MiB", "tree_peak_pss_MiB", "tree_peak_rss_MiB",
                              "tree_peak_processes", "checkpoints_MiB", "run_dir_MiB",
                              "test_accuracy", "round1_seconds", "round_seconds",
                              "top_processes_pss_MiB")}})
    return rows


if __name__ == "__main__":
    print(json.dumps(sim_overhead({"quickstart": []}, repeats=1, plain_repeats=1), indent=1))
