"""The auditor's reference models for LiRA and RMIA (:mod:`attacks.membership.lira`, :mod:`attacks.membership.rmia`), trained
like the target (docs/algorithms.md section 8).

**Data split** (:func:`attack_split`, :func:`plan_references`).  When a reference-model
attack is listed, the never-trained data (holdout and test splits) is divided so that the
audit's non-members, RMIA's population z and the references' training data never overlap:

- the holdout split, shuffled with ``attack.seed``, gives ``attack.reference.population``
  samples (default: half of it) to the population z and the rest to the audit's
  non-member pool (class-matched non-members are drawn from it, as always);
- the *reference pool* is every never-trained sample that is neither audited (members and
  the non-members drawn) nor population: the pool's unused non-members, the test split.

**Size parity** (ML Privacy Meter trains target and references on equal halves of one
pool; LeakPro treats a shadow-model size unlike the target's as a defect).  Every
reference trains on as many samples as the target federation (:func:`target_train_size`),
partitioned over ``federation.num_clients`` clients by ``data.partitioner``: offline, drawn
without replacement from the reference pool; online, its IN half of the audit samples
(references come in pairs with complementary halves: every audit sample IN for exactly half
of them) topped up from the pool.  Where the pool is too small the run refuses before
training (``fedaudit validate`` too) with the sizes and the keys to change, unless
``attack.reference.allow_smaller``; results.json ``references`` has the sizes.

**Reference federations** are trained by a :data:`ReferenceTrainer`: the run's is
:func:`fedaudit.simulation.reference_federations.reference_trainer` -- the target's Flower strategy
stack (DP wrappers included) and ClientApp, on the run's Ray actors or in this process.

**Cache**.  Each reference is stored under a hash of everything that changes it (the
data, canaries, model, training, federation and defense tables, its training ids and
seed) in ``$FEDAUDIT_CACHE/references`` (``fedaudit run --cache DIR`` sets it; default
``$XDG_CACHE_HOME/fedaudit`` or ``~/.cache/fedaudit``), so a second run, a quantizer sweep,
more references or a different attack option with the same recipe trains only what is new.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from attacks.membership.augment import augmented_views
from attacks.membership.oracle import Oracle
from attacks.membership.reference_signals import ReferenceSignals, TuningSignals
from attacks.membership.registry import ReferenceNeeds
from attacks.membership.sequences import as_outcomes
from fedaudit.audit.targets.base import uses_references
from fedaudit.data import FederatedData, partition_data
from fedaudit.errors import ScenarioError
from fedaudit.quant import quantize
from fedaudit.rundir import atomic_torch_save, cache_root
from fedaudit.scenario import Scenario
from fedaudit.training import pick_device
from fedaudit.version import __version__

log = logging.getLogger("fedaudit")

__all__ = ["AttackSplit", "ReferenceJob", "ReferencePlan", "ReferenceSizes", "ReferenceTrainer",
           "References", "attack_split", "load_or_train", "plan_references", "reference_job",
           "reference_signals", "target_train_size", "uses_references"]


@dataclass(frozen=True)
class AttackSplit:
    """Global ids of the audit's non-member pool, RMIA's population z and every sample the
    target never trained on (holdout and test splits; empty without a reference attack).
    The references' pool is what of ``never_trained`` is neither audited nor population
    (:func:`plan_references`)."""

    nonmember_pool: np.ndarray
    population: np.ndarray
    never_trained: np.ndarray

    def summary(self) -> dict[str, Any]:
        return {"nonmember_pool": int(len(self.nonmember_pool)),
                "population": int(len(self.population)),
                "never_trained": int(len(self.never_trained))}


def attack_split(scenario: Scenario, data: FederatedData) -> AttackSplit:
    empty = np.zeros(0, dtype=np.int64)
    if not uses_references(scenario):
        return AttackSplit(data.holdout, empty, empty)
    rng = np.random.default_rng([scenario.attack.seed, 7919])
    h = rng.permutation(data.holdout)
    z = scenario.attack.reference.population or len(h) - len(h) // 2
    if len(h) - z < 1 or z < 1:
        raise ScenarioError(
            f"attack.reference.population = {z}: the holdout split has {len(h)} samples, "
            f"which must give both the population and the non-member pool at least one; "
            f"allowed: 1..{max(1, len(h) - 1)}, or raise data.holdout_fraction")
    # the population keeps its shuffled order: RMIA's `population = Z` takes the first Z,
    # a random subset (sorted ids could follow the dataset's class order)
    never = np.union1d(data.holdout, data.test).astype(np.int64)
    return AttackSplit(np.sort(h[: len(h) - z]), h[len(h) - z:].astype(np.int64), never)


def target_train_size(data: FederatedData) -> int:
    """Samples the target federation trained on (every client's partition)."""
    return int(sum(len(c) for c in data.clients))


@dataclass(frozen=True)
class ReferenceSizes:
    """The reference federations' training sizes against the target's."""

    target: int          # the target federation's training samples
    pool: int            # never-trained samples neither audited nor population
    audit: int           # audit samples (online: each IN for half of the references)
    per_reference: tuple[int, ...]
    online: bool

    @property
    def parity(self) -> bool:
        return all(n == self.target for n in self.per_reference)

    def shortfall(self) -> str | None:
        """One line when the data cannot give every reference the target's size."""
        if self.parity:
            return None
        need = self.target - (self.audit // 2 if self.online else 0)
        return (f"reference models would train on {min(self.per_reference)} samples, the "
                f"target on {self.target}: the reference pool (never-trained samples that "
                f"are neither audited nor RMIA's population) has {self.pool}, "
                f"{'online references need ' + str(need) + ' beside their IN audit samples' if self.online else 'each offline reference needs ' + str(need)}; "
                "raise data.holdout_fraction / data.test_fraction (or data.max_samples), "
                "lower attack.reference.population, or set "
                "attack.reference.allow_smaller = true")


@dataclass(frozen=True)
class ReferencePlan:
    """Which samples each reference trains on, and its training seed."""

    train_ids: tuple[np.ndarray, ...]
    seeds: tuple[int, ...]
    audit_ids: np.ndarray  # sorted ids of the audit samples (members and non-members)
    in_mask: np.ndarray | None  # (R, len(audit_ids)) online; None offline
    sizes: ReferenceSizes


def _pair_halves(scenario: Scenario, n: int, pair: int) -> np.ndarray:
    """Bool (n,): the audit samples IN for reference 2 * pair (its partner 2 * pair + 1
    has the others), a random half drawn for this pair alone, so the first 2k references
    of a run with more are those of a run with 2k (and share its cache)."""
    rng = np.random.default_rng([scenario.seed, scenario.attack.seed, 104729, pair])
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[: (n + pair % 2) // 2]] = True  # odd n: pairs alternate sides
    return mask


def plan_references(scenario: Scenario, data: FederatedData, split: AttackSplit,
                    audit_ids: np.ndarray) -> ReferencePlan:
    """Every reference's training ids: the target's size (:func:`target_train_size`)
    drawn without replacement from the reference pool (offline), or its IN half of the
    audit samples topped up from the pool to that size (online, pairs of complementary
    halves: every audit sample IN for exactly half of the references).  Reference k draws
    from its own generator, so adding references never changes the first ones."""
    cfg = scenario.attack.reference
    audit_ids = np.asarray(audit_ids, dtype=np.int64)
    pool = np.setdiff1d(split.never_trained, np.union1d(audit_ids, split.population))
    target = target_train_size(data)
    online = cfg.mode == "online"
    in_mask = None
    if online:
        halves = [_pair_halves(scenario, len(audit_ids), j) for j in range(cfg.models // 2)]
        in_mask = np.stack([m for h in halves for m in (h, ~h)])
    train, seeds = [], []
    for k in range(cfg.models):
        rng = np.random.default_rng([scenario.seed, scenario.attack.seed, 104723, k])
        inside = audit_ids[in_mask[k]] if online else audit_ids[:0]
        need = max(0, target - len(inside))
        fill = rng.choice(pool, size=min(need, len(pool)), replace=False)
        train.append(np.sort(np.concatenate([inside, fill])).astype(np.int64))
        seeds.append(int(np.random.SeedSequence([scenario.seed, 7, k]).generate_state(1)[0]))
    sizes = ReferenceSizes(target, int(len(pool)), int(len(audit_ids)),
                           tuple(int(len(t)) for t in train), online)
    return ReferencePlan(tuple(train), tuple(seeds), audit_ids, in_mask, sizes)


@dataclass(frozen=True)
class ReferenceJob:
    """One reference federation to train: its training ids over the target's number of
    clients by the target's partitioner, and its seed (model initialisation, client
    sampling, local training, DP noise)."""

    index: int
    ids: np.ndarray
    seed: int
    clients: tuple[np.ndarray, ...]


def reference_job(scenario: Scenario, data: FederatedData, index: int, ids: np.ndarray,
                  seed: int) -> ReferenceJob:
    """``ids`` partitioned like the target's training set (``data.partitioner`` over
    ``federation.num_clients``, seeded by the reference's seed; text: whole speeches,
    :func:`fedaudit.data.federated.partition_data`)."""
    fed = scenario.federation
    try:
        clients = partition_data(ids, data.y, data.text, fed.num_clients, scenario.data, seed)
    except ScenarioError as exc:
        raise ScenarioError(f"reference models ({len(ids)} samples each): {exc}") from None
    return ReferenceJob(index, ids, seed, tuple(np.asarray(c, dtype=np.int64) for c in clients))


#: trains reference federations: jobs in, (job, final state) out as each finishes, and
#: ``round_done(round, rounds)`` called after each round of the batch
#: (:func:`fedaudit.simulation.reference_federations.reference_trainer` gives the Flower one)
ReferenceTrainer = Callable[[Sequence[ReferenceJob], Callable[[int, int], None] | None],
                            Iterator[tuple[ReferenceJob, dict]]]


def _cache_key(scenario: Scenario, ids: np.ndarray, seed: int) -> str:
    sec = scenario.sections()
    recipe = {t: sec[t] for t in ("data", "canaries", "model", "federation", "defense")}
    if scenario.audit.dp.canaries:  # the DP audit's canaries change the data
        recipe["audit.dp"] = sec["audit.dp"]
    recipe["train"] = {k: v for k, v in sec["train"].items() if k != "device"}
    recipe["scenario_seed"] = scenario.seed
    # 2: trained through the Flower strategy stack (fedaudit.simulation.reference_federations)
    recipe["reference_training"] = 2
    recipe["fedaudit"] = __version__
    recipe["torch"] = torch.__version__
    recipe["device"] = pick_device(scenario.train.device).type  # CPU and GPU differ
    h = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode())
    h.update(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
    h.update(str(seed).encode())
    return h.hexdigest()[:40]


@dataclass
class References:
    """The trained (or cached) references of a run and what they cost."""

    states: list[dict[str, torch.Tensor]]
    plan: ReferencePlan
    split: AttackSplit
    trained: int
    cached: int
    seconds: float
    cache_dir: Path

    def summary(self) -> dict[str, Any]:
        """results.json ``references``: the models, their training sizes against the
        target's, the split."""
        z = self.plan.sizes
        return {"models": len(self.states),
                "mode": "online" if self.plan.in_mask is not None else "offline",
                "trained": self.trained, "from_cache": self.cached,
                "train_seconds": self.seconds, "cache_dir": str(self.cache_dir),
                "train_size": list(z.per_reference), "target_train_size": z.target,
                "size_parity": z.parity,
                "split": {**self.split.summary(), "audit_samples": z.audit,
                          "reference_pool": z.pool,
                          "reference_pool_from": "never-trained samples neither audited "
                                                 "nor population"}}


def _load(path: Path) -> dict[str, torch.Tensor] | None:
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a damaged cache entry is retrained
        log.warning("reference cache %s unreadable (%s); retraining", path, exc)
        return None


def load_or_train(scenario: Scenario, data: FederatedData, split: AttackSplit,
                  audit_ids: np.ndarray, trainer: ReferenceTrainer,
                  step: Callable[[int, int, str], None] | None = None) -> References:
    """Every reference of the scenario, from the cache when there, else trained by
    ``trainer`` (``attack.reference.parallel`` at a time) and cached as each batch
    finishes, so an interrupted run keeps what it trained.  Refuses (ScenarioError) when
    the data cannot give the references the target's training size, unless
    ``attack.reference.allow_smaller``."""
    cfg = scenario.attack.reference
    plan = plan_references(scenario, data, split, audit_ids)
    short = plan.sizes.shortfall()
    if short and not cfg.allow_smaller:
        raise ScenarioError(short)
    z = plan.sizes
    log.info("reference models: %d %s federations of %s samples each (target: %d) over %d "
             "clients, from a pool of %d never-trained samples (population %d, audit %d)",
             len(plan.train_ids), cfg.mode, "/".join(map(str, sorted(set(z.per_reference)))),
             z.target, scenario.federation.num_clients, z.pool, len(split.population), z.audit)
    root = cache_root() / "references"
    n = len(plan.train_ids)
    paths = [root / f"{_cache_key(scenario, ids, seed)}.pt"
             for ids, seed in zip(plan.train_ids, plan.seeds)]
    states: list[dict[str, torch.Tensor] | None] = [_load(p) for p in paths]
    cached = sum(s is not None for s in states)
    todo = [k for k in range(n) if states[k] is None]
    t0 = time.perf_counter()
    done = cached
    if step is not None:
        step(done, n, f"{cached} cached" if cached else "training")
    for b in range(0, len(todo), cfg.parallel):
        jobs = [reference_job(scenario, data, k, plan.train_ids[k], plan.seeds[k])
                for k in todo[b: b + cfg.parallel]]
        batch = (f"{jobs[0].index + 1}-{jobs[-1].index + 1}" if len(jobs) > 1
                 else f"{jobs[0].index + 1}")

        def round_done(r: int, rounds: int, batch: str = batch) -> None:
            if step is not None:
                step(done, n, f"training {batch}: round {r}/{rounds}")

        for job, state in trainer(jobs, round_done):
            bad = [name for name, v in state.items() if v.is_floating_point()
                   and not bool(torch.isfinite(v).all())]
            if bad:
                raise ScenarioError(f"reference model {job.index + 1} of {n} diverged "
                                    f"(non-finite {bad[0]!r}); lower train.lr or the "
                                    "defense's noise")
            states[job.index] = state
            try:
                root.mkdir(parents=True, exist_ok=True)
                atomic_torch_save(state, paths[job.index])
            except OSError as exc:
                log.warning("cannot cache reference model under %s: %s", root, exc)
            done += 1
            if step is not None:
                step(done, n, "training")
    if step is not None:
        step(n, n, "done")
    seconds = time.perf_counter() - t0
    log.info("reference models: %d trained, %d from the cache (%s), %.1f s", len(todo),
             cached, root, seconds)
    return References([s for s in states if s is not None], plan, split, len(todo), cached,
                      seconds, root)


#: tuning samples of RMIA's ``a = "auto"`` per side (reference 0's members / non-members)
TUNING_SAMPLES = 1000


def tuning_ids(refs: References) -> tuple[np.ndarray, np.ndarray]:
    """The samples RMIA's ``a`` is tuned on and their membership in every reference
    (R, T): up to :data:`TUNING_SAMPLES` of reference 0's training samples and as many it
    never saw (the rest of the reference pool, the population), drawn with a fixed
    seed.  Reference 0 is the attacked one, the others its references."""
    plan = refs.plan
    rng = np.random.default_rng([len(plan.train_ids), 15485863])
    members = plan.train_ids[0]
    others = np.setdiff1d(np.union1d(refs.split.population,
                                     np.setdiff1d(refs.split.never_trained, plan.audit_ids)),
                          members)
    pick = [np.sort(rng.choice(v, size=min(TUNING_SAMPLES, len(v)), replace=False))
            for v in (members, others)]
    ids = np.concatenate(pick)
    return ids, np.stack([np.isin(ids, t) for t in plan.train_ids])


def reference_signals(refs: References, data: FederatedData, audit_ids: np.ndarray,
                      model: torch.nn.Module, device: torch.device, batch_size: int,
                      quantizer: str | None = None, *,
                      needs: ReferenceNeeds = ReferenceNeeds()) -> ReferenceSignals:
    """The references' outputs on ``audit_ids`` (in that order) and on the population,
    each reference quantized with ``quantizer`` first when the target is a quantized
    release; what the attacks ``needs`` beyond that: with ``augment`` also on the
    augmented views of the audit samples (LiRA's augmented queries), with ``tuning``
    (offline RMIA, ``a = "auto"``) on the tuning samples of :func:`tuning_ids`.  Probabilities come through :class:`attacks.membership.oracle.Oracle`, the
    same path as the target's; on text reduced to each sequence's two outcomes as they
    arrive (:func:`attacks.membership.sequences.as_outcomes`: (R, N, 2), not (R, N, L, V))."""
    pos = np.searchsorted(refs.plan.audit_ids, audit_ids)
    ok = pos < len(refs.plan.audit_ids)
    if not (np.all(ok) and np.array_equal(refs.plan.audit_ids[pos], audit_ids)):
        raise ValueError("audit ids differ from those the references were planned for")
    pop = refs.split.population
    views = augmented_views(data.x[audit_ids], needs.augment) if needs.augment != "none" else []
    tune = needs.tuning and refs.plan.in_mask is None and len(refs.states) > 1
    t_ids, t_mask = tuning_ids(refs) if tune else (None, None)
    probs, pop_probs, view_probs, t_probs = [], [], [], []
    width = data.num_classes if getattr(data, "text", None) is None else 2

    def outputs(oracle: Oracle, ids: np.ndarray) -> np.ndarray:
        return as_outcomes(oracle.predict_proba(data.x[ids]), data.y[ids])[0]
    for state in refs.states:
        model.load_state_dict(quantize(state, quantizer) if quantizer else state)
        oracle = Oracle(model, batch_size=batch_size, device=device)
        probs.append(outputs(oracle, audit_ids))
        pop_probs.append(outputs(oracle, pop) if len(pop) else np.zeros((0, width)))
        view_probs.append([oracle.predict_proba(v) for v in views])
        if tune:
            t_probs.append(outputs(oracle, t_ids))
    mask = None if refs.plan.in_mask is None else refs.plan.in_mask[:, pos]
    stacked = (np.asarray(view_probs, dtype=np.float64).transpose(1, 0, 2, 3)
               if views else None)  # (A, R, N, C)
    tuning = (TuningSignals(np.stack(t_probs).astype(np.float64), data.y[t_ids], t_mask)
              if tune else None)
    return ReferenceSignals(np.stack(probs).astype(np.float64), mask, data.x[pop],
                            data.y[pop], np.stack(pop_probs).astype(np.float64),
                            views=stacked, augment=needs.augment, tuning=tuning)
