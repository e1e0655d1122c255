"""What the server rebuilds from an update (issue 39): the label-leakage and reconstruction
attack families (:mod:`attacks.label_leakage`, :mod:`attacks.reconstruction`) on every
(client, round) update the ``client-updates`` probe kept, scored against the client's true
samples of the round; results.json ``label_leakage`` and ``reconstruction``,
``reconstructions.npz``.

Threat model (written into results.json): an honest-but-curious server that built the
model and wrote the training recipe. It knows each client's update as received, the
global model the client started from, the architecture, the loss, and the ``[train]``
recipe (learning rate, momentum, weight decay, local epochs, batch size) with the
client's reported ``num_examples``; it does not know the client's data, labels or the
order of its batches. ``labels = "given"`` hands the reconstructions the client's true
labels instead of the label attack's guess: an upper bound, said so in the results.

Ground truth: a client trains on all of its partition each round (full local epochs), so
its true samples of a round are its partition (``data.client_samples`` makes a client hold
exactly one batch).  A reconstruction is matched to them by an optimal assignment
(:func:`fedaudit.image_metrics.reconstruction_metrics`); the leakage is measured over the
data-free prior of the dataset-mean image (the train split's mean).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from fedaudit.audit.context import AuditContext
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.update_attack_cache import cache_dir, cache_key, load_cached, save_cached
from fedaudit.audit.update_attacks import CaseResult, UpdateJob, UpdateJobRunner, run_in_process
from fedaudit.data import FederatedData
from fedaudit.options import option
from fedaudit.probes.client_updates import kept_cases, load_case
from fedaudit.registry import registered
from fedaudit.rundir import atomic_save_npz
from fedaudit.rundir.layout import RECONSTRUCTIONS_NAME
from fedaudit.scenario import Scenario
from fedaudit.servers.honest import HonestButCurious

log = logging.getLogger("fedaudit")

__all__ = ["Reconstruction", "THREAT_MODEL", "job_device", "ssim_window", "update_jobs"]

#: what the server knew and used (results.json ``reconstruction.threat_model``)
THREAT_MODEL = HonestButCurious.threat_model


def _check_rounds(value: Any) -> str | None:
    if isinstance(value, str):
        return None if value in ("first", "last", "all") else \
            "must be 'first', 'last', 'all' or a list of rounds"
    if not value or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in value):
        return "a list of rounds must hold round numbers >= 1"
    return None


TABLE = {
    "enabled": option(bool, False, "run the attacks on the clients' updates (label leakage, "
                      "reconstruction) on the server's view"),
    "label_methods": option(list, ["bias-count"], "label-leakage attacks (registered); the "
                            "first one's guess feeds the reconstructions when labels = "
                            "'guess'", item_types=(str,),
                            item_choices=registered("label attack")),
    "methods": option(list, ["inverting-gradients"], "reconstruction attacks (registered); "
                      "[] for label leakage alone", item_types=(str,),
                      item_choices=registered("reconstruction")),
    "labels": option(str, "guess", "the labels the reconstructions get: guess (the first "
                     "label method's) or given (the client's true labels: an upper bound)",
                     choices=("guess", "given")),
    "clients": option(list, [], "clients whose updates are attacked ([] = every client)",
                      item_types=(int,)),
    "rounds": option((str, list), "first", "rounds attacked: first, last, all or a list",
                     check=_check_rounds),
    "max_samples": option(int, 16, "largest update (num_examples) reconstructed; larger "
                          "ones get labels only, with a note", min=1),
    "iterations": option(int, 2000, "optimisation steps per restart", min=1),
    "restarts": option(int, 1, "restarts per reconstruction (the lowest matching loss is "
                       "kept)", min=1),
    "lr": option(float, 0.0, "step size of the optimiser on the dummy data (0 = each "
                 "attack's own default: Adam 0.1, L-BFGS 1)", min=0.0),
    "seed": option(int, 0, "seed of the dummy data's initialisation", min=0),
    "runtime": option(str, "auto", "where the (client, round) jobs run: grid (the run's Ray "
                      "actors, federation.client_resources, several at once), driver (the "
                      "ServerApp's process, one after another), auto (grid in simulation, "
                      "driver when deployed); the results are the same",
                      choices=("auto", "grid", "driver")),
    "device": option(str, "auto", "torch device of the reconstructions: cuda, cpu, or auto "
                     "(cuda when the process running the jobs has a GPU: the ServerApp's, "
                     "or the Ray actors' when federation.client_resources.num_gpus > 0)",
                     choices=("auto", "cpu", "cuda")),
}


def ssim_window(shape: tuple[int, ...]) -> int:
    """Wang et al.'s 11 x 11 window, or the largest odd one that fits smaller images (the
    digits' 8 x 8: 7)."""
    side = min(shape[-2:])
    return 11 if side >= 11 else side - 1 + side % 2


def _true(ctx: AuditContext, client: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ids = ctx.data.clients[client]
    return ids, ctx.data.x[ids], ctx.data.y[ids]


def _attack_tables() -> dict[str, dict[str, Any]]:
    """``[reconstruction]`` and one table per registered attack that declares options:
    ``[reconstruction.<name>]`` for a reconstruction, ``[label_leakage.<name>]`` for a
    label attack (read each time: a plug-in registered later has its table at once)."""
    from attacks.label_leakage import LABEL_ATTACKS
    from attacks.reconstruction import RECONSTRUCTIONS

    out: dict[str, dict[str, Any]] = {"reconstruction": TABLE}
    for prefix, registry in (("reconstruction", RECONSTRUCTIONS),
                             ("label_leakage", LABEL_ATTACKS)):
        for name in registry.names():
            if opts := registry.meta(name).get("options"):
                out[f"{prefix}.{name}"] = dict(opts)
    return out


@register_stage
class Reconstruction(Stage):
    name = "reconstruction"
    order = 460
    writes = ("label_leakage", "reconstruction")
    timing = "attack_seconds"

    @property
    def options(self):  # type: ignore[override]
        return _attack_tables()

    def enabled(self, scenario):
        return bool(scenario.stages["reconstruction"]["enabled"])

    def probes(self, scenario):
        return ("client-updates",)

    def check(self, scenario):
        t = scenario.stages["reconstruction"]
        if t["methods"] and t["labels"] == "guess" and not t["label_methods"]:
            return ("reconstruction.labels = 'guess' needs a label method: list one in "
                    "reconstruction.label_methods, or set reconstruction.labels = 'given'")
        if not t["methods"] and not t["label_methods"]:
            return "reconstruction.enabled = true lists no attack (methods, label_methods)"
        bad = [c for c in t["clients"] if not 0 <= c < scenario.federation.num_clients]
        if bad:
            return (f"reconstruction.clients = {list(t['clients'])!r}: client {bad[0]} does "
                    f"not exist; allowed: 0..{scenario.federation.num_clients - 1}")
        if t["device"] == "cuda" and t["runtime"] != "driver" \
                and scenario.federation.client_resources.num_gpus <= 0:
            return ("reconstruction.device = 'cuda' runs the jobs on the Ray actors, which "
                    "need federation.client_resources.num_gpus > 0 (or set "
                    "reconstruction.runtime = 'driver')")
        rounds = t["rounds"]
        if not isinstance(rounds, str) and max(rounds) > scenario.federation.rounds:
            return (f"reconstruction.rounds = {list(rounds)!r}: round {max(rounds)} does not "
                    f"exist; allowed: 1..{scenario.federation.rounds}")
        return None

    def check_data(self, scenario, data):
        if data.text is not None:
            return (f"reconstruction.enabled = true: the attacks on updates rebuild images; "
                    f"data.dataset = {scenario.data.dataset!r} is text")
        return None

    def run(self, ctx: AuditContext) -> None:
        t = ctx.scenario.stages["reconstruction"]
        runner = ctx.update_runner or run_in_process
        device = job_device(ctx.scenario, on_actors=getattr(runner, "on_actors", False))
        jobs, notes = update_jobs(ctx.scenario, ctx.data, ctx.run_dir, device=device)
        t0 = time.perf_counter()
        results, cached, failed = _run_jobs(ctx, runner, jobs)
        seconds = time.perf_counter() - t0
        prior = ctx.data.x[ctx.data.train].mean(axis=0)
        ctx.results["label_leakage"] = {**_label_results(ctx, t, results), "notes": failed}
        if t["methods"]:
            ctx.results["reconstruction"] = {
                **_reconstruction_results(ctx, t, results, prior, _budget(t, device),
                                          seconds, notes + failed),
                "cache": {"from_cache": cached, "dir": str(cache_dir())},
                "ran_on": getattr(runner, "where",
                                  "the ServerApp's process, one job after another")}


def _budget(t: dict, device: str):
    from attacks.reconstruction import Budget

    return Budget(iterations=t["iterations"], restarts=t["restarts"], lr=t["lr"] or None,
                  device=device)


def job_device(scenario: Scenario, *, on_actors: bool) -> str:
    """``reconstruction.device`` resolved where the jobs are built, so that the cache key
    and results.json name the device that computed them: ``auto`` is ``cuda`` when this
    process sees a GPU and the jobs run here (``on_actors`` False) or on actors that get
    one (``federation.client_resources.num_gpus > 0``; Ray hides the GPUs from the
    others), else ``cpu``."""
    import torch

    choice = scenario.stages["reconstruction"]["device"]
    if choice != "auto":
        return choice
    if not torch.cuda.is_available():
        return "cpu"
    if on_actors and scenario.federation.client_resources.num_gpus <= 0:
        return "cpu"
    return "cuda"


def update_jobs(scenario: Scenario, data: FederatedData, run_dir: Path, *,
                device: str = "cpu") -> tuple[list[UpdateJob], list[str]]:
    """One :class:`UpdateJob` per (client, round) update the ``client-updates`` probe kept in
    ``run_dir``, as ``[reconstruction]`` asks, the reconstructions on ``device``, and the
    notes of the updates too large to rebuild (labels only)."""
    t = scenario.stages["reconstruction"]
    budget = _budget(t, device)
    options = {name: dict(scenario.stages.get(f"{prefix}.{name}", {}))
               for prefix, names in (("label_leakage", t["label_methods"]),
                                     ("reconstruction", t["methods"]))
               for name in names}
    notes, jobs = [], []
    for case in kept_cases(run_dir):
        start, received = load_case(run_dir, case)
        methods = tuple(t["methods"]) if case.num_examples <= t["max_samples"] else ()
        if t["methods"] and not methods:
            notes.append(f"client {case.client} round {case.round}: {case.num_examples} "
                         f"samples > reconstruction.max_samples = {t['max_samples']}: "
                         "labels only")
        jobs.append(UpdateJob(scenario, case.client, case.round, case.num_examples,
                              tuple(data.x.shape[1:]), data.num_classes, start, received,
                              tuple(t["label_methods"]), methods, t["labels"],
                              data.y[data.clients[case.client]], budget, options, t["seed"]))
    return jobs, notes


def _run_jobs(ctx: AuditContext, runner: UpdateJobRunner,
              jobs: list[UpdateJob]) -> tuple[list[CaseResult], int, list[str]]:
    """Each job's result, from the cache or from the run's job runner (cached as each
    finishes, so an interrupted audit keeps what it computed), in the jobs' order; a job
    that failed is left out.  Returns (results, how many came from the cache, a note per
    failed job)."""
    keys = [cache_key(job) for job in jobs]
    done: list[CaseResult | None] = [load_cached(k) for k in keys]
    cached = sum(r is not None for r in done)
    todo = [i for i, r in enumerate(done) if r is None]
    finished, failed = cached, []
    ctx.progress.step("reconstruction", finished, len(jobs),
                      f"{cached} cached" if cached else "running")
    for k, out in runner([jobs[i] for i in todo]):
        i = todo[k]
        if isinstance(out, str):
            failed.append(f"client {jobs[i].client} round {jobs[i].round}: the attacks "
                          f"failed ({out}); left out")
            log.warning("reconstruction: %s", failed[-1])
        else:
            done[i] = out
            save_cached(keys[i], out)
        finished += 1
        ctx.progress.step("reconstruction", finished, len(jobs),
                          f"client {jobs[i].client}, round {jobs[i].round}")
    return [r for r in done if r is not None], cached, failed


def _label_results(ctx: AuditContext, t: dict, results: list[CaseResult]) -> dict[str, Any]:
    from attacks.label_leakage import count_error, label_accuracy

    per_case, pooled = [], {m: [] for m in t["label_methods"]}
    for res in results:
        true = np.bincount(_true(ctx, res.client)[2], minlength=ctx.data.num_classes)
        entry: dict[str, Any] = {"client": res.client, "round": res.round,
                                 "num_examples": int(true.sum())}
        for m, guess in res.guesses.items():
            acc, err = label_accuracy(guess.counts, true), count_error(guess.counts, true)
            entry[m] = {"label_accuracy": float(acc), "count_error": int(err),
                        "seconds": res.seconds[m]}
            hits = int(np.minimum(guess.counts, true).sum())  # acc = hits / samples
            pooled[m].append((acc, err, hits, int(true.sum())))
        per_case.append(entry)
    return {"methods": list(t["label_methods"]), "threat_model": THREAT_MODEL,
            "cases": per_case, "pooled": {m: _pooled_labels(v) for m, v in pooled.items()}}


def _pooled_labels(cases: list[tuple[float, int, int, int]]) -> dict[str, Any]:
    """The mean label accuracy and count error over the cases, and the share of all the
    cases' samples whose label was recovered (``labels_recovered`` of ``labels``) with its
    Clopper-Pearson 95 % interval, ``label_accuracy_ci`` (samples as independent trials:
    docs/algorithms.md section 13)."""
    from fedaudit.intervals import clopper_pearson

    out: dict[str, Any] = {
        "label_accuracy": float(np.mean([c[0] for c in cases])) if cases else None,
        "count_error": float(np.mean([c[1] for c in cases])) if cases else None,
        "cases": len(cases)}
    hits, n = sum(c[2] for c in cases), sum(c[3] for c in cases)
    if n:
        out.update(labels=n, labels_recovered=hits,
                   label_accuracy_ci=list(clopper_pearson(hits, n)))
    return out


def _reconstruction_results(ctx: AuditContext, t: dict, results: list[CaseResult],
                            prior: np.ndarray, budget: Any, seconds: float,
                            notes: list[str]) -> dict[str, Any]:
    from fedaudit.image_metrics import pool_metrics, reconstruction_metrics

    rows: dict[str, list] = {k: [] for k in ("image", "true_image", "client", "round",
                                             "method", "true_id",
                                             "label", "psnr", "ssim", "prior_ssim",
                                             "identifiable", "label_correct", "leakage")}
    per_case, pooled = [], {m: [] for m in t["methods"]}
    for res in results:
        ids, x, y = _true(ctx, res.client)
        entry: dict[str, Any] = {"client": res.client, "round": res.round,
                                 "num_examples": int(len(ids))}
        for m, rec in res.reconstructions.items():
            met = reconstruction_metrics(rec.images, rec.labels, x, y, prior, data_range=1.0,
                                         win_size=ssim_window(x.shape))
            entry[m] = {**met.pooled().as_dict(), "matching_loss": float(rec.loss),
                        "seconds": res.seconds[m]}
            pooled[m].append(met)
            n = len(rec.images)
            rows["image"].append(np.asarray(rec.images, dtype=np.float32))
            rows["client"].append(np.full(n, res.client))
            rows["round"].append(np.full(n, res.round))
            rows["method"].append(np.full(n, m))
            rows["true_id"].append(ids[met.matched])
            rows["true_image"].append(np.asarray(x[met.matched], dtype=np.float32))
            rows["label"].append(np.asarray(rec.labels, dtype=np.int64))
            for k in ("psnr", "ssim", "prior_ssim", "identifiable", "label_correct",
                      "leakage"):
                rows[k].append(np.asarray(getattr(met, k)))
        per_case.append(entry)
    if rows["image"]:
        atomic_save_npz(ctx.run_dir / RECONSTRUCTIONS_NAME,
                        **{k: np.concatenate(v) for k, v in rows.items()})
    labels_from = ("the client's true labels (an upper bound)" if t["labels"] == "given" else
                   f"the guess of {t['label_methods'][0]}")
    return {"methods": list(t["methods"]), "threat_model": THREAT_MODEL,
            "labels_from": labels_from,
            "budget": {"iterations": budget.iterations, "restarts": budget.restarts,
                       "lr": budget.lr, "max_samples": t["max_samples"], "seed": t["seed"],
                       "device": budget.device},
            "prior": "the train split's mean image",
            "ssim_window": ssim_window(ctx.data.x.shape),
            "cases": per_case,
            "pooled": {m: pool_metrics(v).as_dict() for m, v in pooled.items()},
            "seconds": seconds, "notes": notes}
