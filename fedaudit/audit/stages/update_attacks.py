"""The attacks on the clients' updates (issues 39, 48): every enabled family of
:mod:`attacks.update_family` (label leakage, reconstruction, a plug-in's) on the (client,
round) updates the ``client-updates`` probe kept, scored against the client's true samples
of the round; results.json ``<family>`` and each family's file (``reconstructions.npz``).

Threat model (written into each family's results): an honest-but-curious server that built
the model and wrote the training recipe (:class:`fedaudit.servers.honest.HonestButCurious`).
It knows each client's update as received, the global model the client started from, the
architecture, the loss, and the ``[train]`` recipe with the client's reported
``num_examples``; it does not know the client's data, labels or the order of its batches.

Ground truth: a client trains on all of its partition each round (full local epochs), so
its true samples of a round are its partition (``data.client_samples`` makes a client hold
exactly one batch).  One job per (case, family) (:mod:`fedaudit.audit.update_attacks`),
all of them through the run's job runner at once, each result cached as it arrives
(:mod:`fedaudit.audit.update_attack_cache`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from attacks.label_leakage.baseline import class_prior
from attacks.update_family import (AGGREGATE_CLIENT, ON_VIEWS, CaseTruth, JobSpec, Scoring,
                                   UpdateAttackFamily, enabled_families, families)
from fedaudit.audit.context import AuditContext, Trajectory
from fedaudit.audit.job_progress import JobWatcher, job_files
from fedaudit.audit.stages.base import Stage, register_stage
from fedaudit.audit.update_attack_cache import cache_dir, cache_key, load_cached, save_cached
from fedaudit.audit.update_attacks import CaseResult, UpdateJob, UpdateJobRunner, run_in_process
from fedaudit.data import FederatedData
from fedaudit.options import option
from fedaudit.probes.client_updates import UpdateSelection, kept_cases, load_case
from fedaudit.rundir import atomic_save_npz
from fedaudit.rundir.layout import aggregate_file
from fedaudit.scenario import Scenario
from fedaudit.servers.honest import HonestButCurious

log = logging.getLogger("fedaudit")

__all__ = ["AGGREGATE_THREAT_MODEL", "THREAT_MODEL", "AggregateRound", "FamilyPlan",
           "UpdateAttacks", "aggregate_jobs", "aggregate_rounds", "family_plans", "job_device",
           "update_jobs"]

#: what the server knew and used (results.json ``<family>.threat_model``)
THREAT_MODEL = HonestButCurious.threat_model
#: what the attacker on a round's aggregate knew (results.json ``<family>.aggregate``)
AGGREGATE_THREAT_MODEL = {
    "position": "a curious server that sees only each round's aggregate (secure "
                "aggregation), or any client (it receives consecutive global models)",
    "knows": ["the global model before and after the round (their difference is the "
              "round's aggregate update)", "which clients the round aggregated and the "
              "num_examples each declared", "the architecture, the loss and the [train] "
              "recipe"],
    "does_not_know": ["any single client's update", "the clients' data and labels"],
}

#: ``[update_attacks]``: where the jobs of every family run
TABLE = {
    "runtime": option(str, "auto", "where the (client, round) jobs run: grid (the run's Ray "
                      "actors, federation.client_resources, several at once), driver (the "
                      "ServerApp's process, one after another), auto (grid in simulation, "
                      "driver when deployed); the results are the same",
                      choices=("auto", "grid", "driver")),
    "device": option(str, "auto", "torch device of the jobs: cuda, cpu, or auto (cuda when "
                     "the process running the jobs has a GPU: the ServerApp's, or the Ray "
                     "actors' when federation.client_resources.num_gpus > 0)",
                     choices=("auto", "cpu", "cuda")),
}


@register_stage
class UpdateAttacks(Stage):
    name = "update-attacks"
    order = 460
    timing = "attack_seconds"

    @property
    def writes(self):  # type: ignore[override]
        return tuple(f.name for f in families())

    @property
    def options(self):  # type: ignore[override]
        out = {"update_attacks": TABLE}
        for f in families():
            out.update(f.tables())
        return out

    def enabled(self, scenario):
        return bool(enabled_families(scenario))

    def probes(self, scenario):
        # a round's aggregate is read from the run's checkpoints: no probe needed
        each = any("updates" in scenario.stages[f.name]["on"] for f in enabled_families(scenario))
        return ("client-updates",) if each else ()

    def check(self, scenario):
        n, total = scenario.federation.num_clients, scenario.federation.rounds
        for f in enabled_families(scenario):
            t = scenario.stages[f.name]
            if not t["methods"]:
                return f"{f.name}.enabled = true lists no attack in {f.name}.methods"
            on = list(t["on"])
            if not on or len(set(on)) != len(on):
                return (f"{f.name}.on = {on!r}: list each of {', '.join(f.views)} at most "
                        "once, at least one")
            if bad := [v for v in on if v not in f.views]:
                return (f"{f.name}.on = {on!r}: the {f.title} attacks do not read "
                        f"{ON_VIEWS[bad[0]]}; allowed: {', '.join(f.views)}")
            bad = [c for c in t["clients"] if not 0 <= c < n]
            if bad:
                return (f"{f.name}.clients = {list(t['clients'])!r}: client {bad[0]} does "
                        f"not exist; allowed: 0..{n - 1}")
            rounds = t["rounds"]
            numbers = [] if isinstance(rounds, str) else [r for r in rounds
                                                          if isinstance(r, int)]
            if numbers and max(numbers) > total:
                return (f"{f.name}.rounds = {list(rounds)!r}: round {max(numbers)} does not "
                        f"exist; allowed: 1..{total}")
            if isinstance(rounds, str) and rounds.startswith("every ") \
                    and int(rounds.split()[1]) > total:
                return (f"{f.name}.rounds = {rounds!r}: no round is a multiple of "
                        f"{rounds.split()[1]} in 1..{total}")
            if msg := f.check(scenario):
                return msg
        u = scenario.stages["update_attacks"]
        if u["device"] == "cuda" and u["runtime"] != "driver" \
                and scenario.federation.client_resources.num_gpus <= 0:
            return ("update_attacks.device = 'cuda' runs the jobs on the Ray actors, which "
                    "need federation.client_resources.num_gpus > 0 (or set "
                    "update_attacks.runtime = 'driver')")
        return None

    def check_data(self, scenario, data):
        if data.text is not None:
            names = ", ".join(f.name for f in enabled_families(scenario))
            return (f"{names}: the attacks on updates read image classifiers' updates; "
                    f"data.dataset = {scenario.data.dataset!r} is text")
        return None

    def run(self, ctx: AuditContext) -> None:
        runner = ctx.update_runner or run_in_process
        device = job_device(ctx.scenario, on_actors=getattr(runner, "on_actors", False))
        plans = family_plans(ctx.scenario, ctx.data)  # the auxiliary data drawn once
        jobs, notes = update_jobs(ctx.scenario, ctx.data, ctx.run_dir, device=device,
                                  plans=plans)
        rounds = aggregate_rounds(ctx.results["rounds"], ctx.data)
        more, more_notes = aggregate_jobs(ctx.scenario, ctx.data, ctx.trajectory, rounds,
                                          device=device, plans=plans)
        for name, lines in more_notes.items():
            notes.setdefault(name, []).extend(lines)
        t0 = time.perf_counter()
        results, cached, failed = _run_jobs(ctx, runner, jobs + more)
        seconds = time.perf_counter() - t0  # every family's jobs run together
        prior = ctx.data.x[ctx.data.train].mean(axis=0)
        # what the server knows of a client's labels without its update
        labels_prior = class_prior(ctx.data.y[ctx.data.auxiliary], ctx.data.num_classes)
        by_round = {r.round: r for r in rounds}
        for p in plans:
            f = p.family
            section: dict[str, Any] = {"methods": list(p.table["methods"]),
                                       "threat_model": THREAT_MODEL}
            for view in p.table["on"]:
                mine = [r for r in results if r.family == f.name
                        and (r.client == AGGREGATE_CLIENT) == (view == "aggregate")]
                scored = f.score(mine, Scoring(
                    methods=list(p.table["methods"]),
                    truths=[_truth(ctx.data, r, by_round) for r in mine],
                    num_classes=ctx.data.num_classes, prior=prior, settings=p.settings,
                    device=device, inputs=p.inputs, class_prior=labels_prior))
                if scored.arrays is not None and f.file:
                    name = f.file if view == "updates" else aggregate_file(f.file)
                    atomic_save_npz(ctx.run_dir / name, **scored.arrays)
                if view == "updates":
                    section.update(scored.section)
                else:
                    kept = sorted({r.round for r in mine})
                    section["aggregate"] = {
                        "methods": list(p.table["methods"]),
                        "threat_model": AGGREGATE_THREAT_MODEL,
                        "rounds": [by_round[r].as_dict() for r in kept], **scored.section}
            ctx.results[f.name] = {
                **section, "seconds": seconds,
                "notes": notes.get(f.name, []) + failed.get(f.name, []),
                "cache": {"from_cache": cached.get(f.name, 0), "dir": str(cache_dir())},
                "ran_on": getattr(runner, "where",
                                  "the ServerApp's process, one job after another")}


@dataclass(frozen=True)
class AggregateRound:
    """A round whose aggregate replaced the global model: the clients it aggregated
    (rounds.jsonl ``clients``) and their samples (each client trains on its whole
    partition every round)."""

    round: int
    clients: tuple[int, ...]
    num_examples: int

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "clients": list(self.clients),
                "num_examples": self.num_examples}

    def samples(self, data: FederatedData) -> np.ndarray:
        """The round's samples (dataset ids): its clients' partitions, in client order."""
        return np.concatenate([data.clients[c] for c in self.clients])


def aggregate_rounds(rounds: list[dict[str, Any]], data: FederatedData) -> list[AggregateRound]:
    """The rounds of results.json ``rounds`` whose aggregate replaced the global model."""
    return [AggregateRound(int(line["round"]), tuple(int(c) for c in line["clients"]),
                           int(sum(len(data.clients[c]) for c in line["clients"])))
            for line in rounds if line.get("aggregated") and line.get("clients")]


def _truth(data: FederatedData, r: CaseResult,
           rounds: Mapping[int, AggregateRound]) -> CaseTruth:
    if r.client == AGGREGATE_CLIENT:
        ids = rounds[r.round].samples(data)
    else:
        ids = data.clients[r.client]
    return CaseTruth(r.client, r.round, ids, data.x[ids], data.y[ids])


def job_device(scenario: Scenario, *, on_actors: bool) -> str:
    """``update_attacks.device`` resolved where the jobs are built, so that the cache key
    and results.json name the device that computed them: ``auto`` is ``cuda`` when this
    process sees a GPU and the jobs run here (``on_actors`` False) or on actors that get
    one (``federation.client_resources.num_gpus > 0``; Ray hides the GPUs from the
    others), else ``cpu``."""
    import torch

    choice = scenario.stages["update_attacks"]["device"]
    if choice != "auto":
        return choice
    if not torch.cuda.is_available():
        return "cpu"
    if on_actors and scenario.federation.client_resources.num_gpus <= 0:
        return "cpu"
    return "cuda"


@dataclass(frozen=True, eq=False)
class FamilyPlan:
    """What an enabled family's jobs and its scoring share, built once per audit: its table,
    the updates it selects, each method's options, its settings and its inputs."""

    family: UpdateAttackFamily
    table: Mapping[str, Any]
    select: UpdateSelection
    options: dict[str, dict[str, Any]]
    settings: dict[str, Any]
    inputs: dict[str, np.ndarray]


def family_plans(scenario: Scenario, data: FederatedData) -> list[FamilyPlan]:
    """One :class:`FamilyPlan` per enabled family, in the families' order."""
    out = []
    for f in enabled_families(scenario):
        t = scenario.stages[f.name]
        out.append(FamilyPlan(
            f, t, UpdateSelection.of(t, scenario.federation.rounds),
            {m: dict(scenario.stages.get(f"{f.name}.{m}", {})) for m in t["methods"]},
            f.settings(scenario), f.inputs(scenario, data)))
    return out


def update_jobs(scenario: Scenario, data: FederatedData, run_dir: Path, *,
                device: str = "cpu", plans: list[FamilyPlan] | None = None
                ) -> tuple[list[UpdateJob], dict[str, list[str]]]:
    """One :class:`UpdateJob` per (case, enabled family) for every (client, round) update
    the ``client-updates`` probe kept in ``run_dir`` that the family's table selects, and
    each family's notes of the cases it leaves out (its ``methods_for``); ``plans``: the
    families' :func:`family_plans` when the caller has them already."""
    plans = family_plans(scenario, data) if plans is None else plans
    jobs, notes = [], {}
    for case in kept_cases(run_dir):
        start, received = load_case(run_dir, case)
        true = data.y[data.clients[case.client]]
        for p in plans:
            if "updates" not in p.table["on"] or not (
                    p.select.keeps_client(case.client) and p.select.keeps_round(case.round)):
                continue
            job = _family_job(p, scenario, data, case.client, case.round, case.num_examples,
                              (start, received), true, device, notes,
                              f"client {case.client} round {case.round}")
            if job is not None:
                jobs.append(job)
    return jobs, notes


def _family_job(p: FamilyPlan, scenario: Scenario, data: FederatedData, client: int,
                round_: int, num_examples: int, models: tuple[dict, dict], true: np.ndarray,
                device: str, notes: dict[str, list[str]], where: str,
                merged: int = 1) -> UpdateJob | None:
    """The family's job on one case (its methods for the case's size; None, with a note,
    when it runs none); ``models`` = (start, received)."""
    methods, note = p.family.methods_for(p.table, num_examples)
    if note:
        notes.setdefault(p.family.name, []).append(f"{where}: {note}")
    if not methods:
        return None
    spec = JobSpec(methods, {m: p.options[m] for m in methods}, p.settings, true, device,
                   p.inputs)
    return UpdateJob(scenario, p.family.name, client, round_, num_examples,
                     tuple(data.x.shape[1:]), data.num_classes, *models, spec, merged=merged)


def _run_jobs(ctx: AuditContext, runner: UpdateJobRunner, jobs: list[UpdateJob]
              ) -> tuple[list[CaseResult], dict[str, int], dict[str, list[str]]]:
    """Each job's result, from the cache or from the run's job runner (cached as each
    finishes, so an interrupted audit keeps what it computed), in the jobs' order; a job
    that failed is left out.  Returns (results, per family how many came from the cache,
    per family a note per failed job)."""
    keys = [cache_key(job) for job in jobs]
    done: list[CaseResult | None] = [load_cached(k) for k in keys]
    cached: dict[str, int] = {}
    for job, r in zip(jobs, done):
        cached[job.family] = cached.get(job.family, 0) + (r is not None)
    todo = [i for i, r in enumerate(done) if r is None]
    finished, failed = len(jobs) - len(todo), {}
    ctx.progress.step("update attacks", finished, len(jobs),
                      f"{finished} cached" if finished else "running")
    t0, rate, last = time.perf_counter(), "", ""
    with job_files(ctx.run_dir) as folder, JobWatcher(folder, lambda text: ctx.progress.step(
            "update attacks", finished, len(jobs), f"{text}{rate}")) as watcher:
        sent = [replace(jobs[i], progress_file=str(folder / f"{i}.json")) for i in todo]
        for k, out in runner(sent):
            i = todo[k]
            job = jobs[i]
            watcher.finished(str(i))
            if isinstance(out, str):
                failed.setdefault(job.family, []).append(
                    f"client {job.client} round {job.round}: the attacks failed ({out}); "
                    "left out")
                log.warning("%s: %s", job.family, failed[job.family][-1])
            else:
                done[i] = out
                save_cached(keys[i], out)
            finished += 1
            ran = finished - (len(jobs) - len(todo))  # k: a position, in any order
            per_job = (time.perf_counter() - t0) / ran  # jobs run side by side: wall time
            eta = f"{per_job:.1f} s per job, eta {per_job * (len(todo) - ran):.0f} s"
            rate = f"; {eta}"
            log.info("update attacks: %d of %d jobs done (%s, client %d, round %d; %s)",
                     finished, len(jobs), job.family, job.client, job.round, eta)
            last = f"{job.family}, client {job.client}, round {job.round}; {eta}"
            ctx.progress.step("update attacks", finished, len(jobs), last)
    if todo:  # the watcher's last line may have come after the last reply's
        ctx.progress.step("update attacks", finished, len(jobs), last)
    return [r for r in done if r is not None], cached, failed


def _initial_state(scenario: Scenario, data: FederatedData) -> dict[str, Any]:
    """The global model the server sent in round 1 (the recorder's start: the served model
    built from the scenario's seed)."""
    from fedaudit.servers import served_model

    return {k: v.detach().clone()
            for k, v in served_model(scenario, data, seed=scenario.seed).state_dict().items()}


def aggregate_jobs(scenario: Scenario, data: FederatedData, trajectory: Trajectory,
                   rounds: list[AggregateRound], *, device: str = "cpu",
                   plans: list[FamilyPlan] | None = None
                   ) -> tuple[list[UpdateJob], dict[str, list[str]]]:
    """One :class:`UpdateJob` per (round, family listing ``aggregate`` in ``on``) for the
    rounds of ``rounds`` the family's ``rounds`` selects: the global model before the round
    as the start, the one after it as received, the round's clients' samples as its
    ``num_examples`` (``client`` = :data:`~attacks.update_family.AGGREGATE_CLIENT`,
    ``merged`` = the round's clients); and each family's notes."""
    plans = family_plans(scenario, data) if plans is None else plans
    plans = [p for p in plans if "aggregate" in p.table["on"]]
    jobs: list[UpdateJob] = []
    notes: dict[str, list[str]] = {}
    if not plans:
        return jobs, notes
    for r in rounds:
        wanted = [p for p in plans if p.select.keeps_round(r.round)]
        if not wanted:
            continue
        start = (_initial_state(scenario, data) if r.round == 1
                 else trajectory.state(r.round - 1))
        received = trajectory.state(r.round)
        ids = r.samples(data)
        for p in wanted:
            job = _family_job(p, scenario, data, AGGREGATE_CLIENT, r.round, r.num_examples,
                              (start, received), data.y[ids], device, notes,
                              f"aggregate of round {r.round}", merged=len(r.clients))
            if job is not None:
                jobs.append(job)
    return jobs, notes
