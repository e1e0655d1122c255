"""The auditor's reference models for LiRA and RMIA (:mod:`attacks.reference`).

**Data split** (:func:`attack_split`; docs/algorithms.md section 8).  When a
reference-model attack is listed, the never-trained data is divided so that the audit's
non-members, RMIA's population samples z and the references' training data never overlap:

- the holdout split, shuffled with ``attack.seed``, gives its first half to the audit's
  non-member pool (class-matched non-members are drawn from it, as always) and its second
  half to the population z;
- the references train on the test split (data the target never trained on; the target's
  accuracy and r_Qn still use it, the references do not change them).

Without a reference attack the non-member pool is the whole holdout, as before.

**Reference federations** (:func:`train_reference`).  A reference is a federation trained
like the target: the same model and initialisation rule, ``num_clients`` clients over the
scenario's partitioner, ``rounds`` rounds of FedAvg with the same client sampling fraction,
each client running :func:`fedaudit.training.train_local` -- the Flower clients' own code --
with the same optimizer, learning rate, local epochs and batch size, under ``dp-sgd``
the same DP-SGD, and under ``dp-server`` / ``dp-client`` / ``clip`` the same update
clipping and Gaussian noise on the mean.  Reference k trains on a random half of the
test split (drawn, in order of k, from one generator seeded by the scenario and attack
seeds); online, plus the audit samples that are IN for it: every audit sample, member or not, is
IN for exactly half of the references.  They train in this process (no Ray).

**Cache**.  Each reference is stored under a hash of everything that changes it (the
data, canaries, model, training, federation and defense tables, its training ids and
seed) in ``$FEDAUDIT_CACHE/references`` (``fedaudit run --cache DIR`` sets it; default
``$XDG_CACHE_HOME/fedaudit`` or ``~/.cache/fedaudit``), so a second run, a quantizer sweep
or a different attack option with the same recipe trains nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from attacks.oracle import Oracle
from attacks.reference import ReferenceSignals
from fedaudit.audit.targets.base import uses_references
from fedaudit.data import FederatedData, partition_ids
from fedaudit.defenses import get_defense
from fedaudit.errors import ScenarioError
from fedaudit.models import model_for
from fedaudit.quant import quantize
from fedaudit.rundir import atomic_torch_save, cache_root
from fedaudit.scenario import Scenario
from fedaudit.training import client_seed, pick_device, train_local
from fedaudit.version import __version__

log = logging.getLogger("fedaudit")

__all__ = ["AttackSplit", "References", "attack_split", "load_or_train",
           "plan_references", "reference_signals", "train_reference", "uses_references"]


@dataclass(frozen=True)
class AttackSplit:
    """Global ids of the audit's non-member pool, RMIA's population z and the data the
    references train on (both empty without a reference attack)."""

    nonmember_pool: np.ndarray
    population: np.ndarray
    reference_pool: np.ndarray

    def summary(self) -> dict[str, Any]:
        return {"nonmember_pool": int(len(self.nonmember_pool)),
                "population": int(len(self.population)),
                "reference_pool": int(len(self.reference_pool)),
                "reference_pool_from": "test split" if len(self.reference_pool) else None}


def attack_split(scenario: Scenario, data: FederatedData) -> AttackSplit:
    empty = np.zeros(0, dtype=np.int64)
    if not uses_references(scenario):
        return AttackSplit(data.holdout, empty, empty)
    rng = np.random.default_rng([scenario.attack.seed, 7919])
    h = rng.permutation(data.holdout)
    half = len(h) // 2
    if half < 1 or len(data.test) < 2:
        raise ScenarioError(f"data: holdout ({len(h)}) and test ({len(data.test)}) splits are "
                            "too small for reference-model attacks; raise "
                            "data.holdout_fraction / data.test_fraction")
    # the population keeps its shuffled order: RMIA's `population = Z` takes the first Z,
    # a random subset (sorted ids could follow the dataset's class order)
    return AttackSplit(np.sort(h[:half]), h[half:].astype(np.int64), np.sort(data.test))


@dataclass(frozen=True)
class ReferencePlan:
    """Which samples each reference trains on, and its training seed."""

    train_ids: tuple[np.ndarray, ...]
    seeds: tuple[int, ...]
    audit_ids: np.ndarray  # sorted ids of the audit samples (members and non-members)
    in_mask: np.ndarray | None  # (R, len(audit_ids)) online; None offline


def plan_references(scenario: Scenario, split: AttackSplit,
                    audit_ids: np.ndarray) -> ReferencePlan:
    cfg = scenario.attack.reference
    r = cfg.models
    rng = np.random.default_rng([scenario.seed, scenario.attack.seed, 104723])
    audit_ids = np.asarray(audit_ids, dtype=np.int64)
    in_mask = None
    if cfg.mode == "online":
        # each audit sample IN for exactly r/2 references, chosen at random per sample
        ranks = rng.permuted(np.tile(np.arange(r), (len(audit_ids), 1)), axis=1)
        in_mask = np.zeros((r, len(audit_ids)), dtype=bool)
        for k in range(r):
            in_mask[k] = (ranks[:, : r // 2] == k).any(axis=1)
    pool = split.reference_pool
    train, seeds = [], []
    for k in range(r):
        ids = rng.choice(pool, size=max(1, len(pool) // 2), replace=False)
        if in_mask is not None:
            ids = np.concatenate([ids, audit_ids[in_mask[k]]])
        train.append(np.sort(ids).astype(np.int64))
        seeds.append(int(np.random.SeedSequence([scenario.seed, 7, k]).generate_state(1)[0]))
    return ReferencePlan(tuple(train), tuple(seeds), audit_ids, in_mask)


def _average(states: list[dict[str, torch.Tensor]], weights: list[float]) -> dict:
    """FedAvg of state dicts (Flower's aggregate: sum of w_i / sum(w) * tensor_i)."""
    total = float(sum(weights))
    out = {}
    for k, v in states[0].items():
        acc = sum(s[k].double() * (w / total) for s, w in zip(states, weights))
        out[k] = acc.to(v.dtype)
    return out


def _clip_update(state: dict[str, torch.Tensor], start: dict[str, torch.Tensor],
                 clip_norm: float) -> dict[str, torch.Tensor]:
    """``start + u * min(1, C / ||u||)``, ``u = state - start`` flattened over every tensor
    (Flower's ``compute_clip_model_update``, which the dp-server / dp-client / clip
    wrappers apply to each reply)."""
    u = {k: state[k].double() - start[k].double() for k in state}
    norm = float(torch.sqrt(sum((v ** 2).sum() for v in u.values())))
    scale = min(1.0, clip_norm / norm) if norm > 0 else 1.0
    return {k: (start[k].double() + u[k] * scale).to(state[k].dtype) for k in state}


def _add_noise(state: dict[str, torch.Tensor], std: float,
               gen: np.random.Generator) -> dict[str, torch.Tensor]:
    """Gaussian noise of ``std`` on every tensor of the aggregate (Flower's central DP
    wrappers: std = noise_multiplier * clip_norm / sampled clients)."""
    return {k: (v.double() + torch.from_numpy(gen.normal(0.0, std, tuple(v.shape))))
            .to(v.dtype) for k, v in state.items()}


def train_reference(scenario: Scenario, data: FederatedData, ids: np.ndarray, seed: int,
                    device: torch.device,
                    trajectory: list[dict[str, torch.Tensor]] | None = None) -> dict[str, torch.Tensor]:
    """One reference federation on ``ids`` (see the module docstring); its final state.
    With ``trajectory``, the global state after each round is appended to it (the r_Qn
    validation uses these federations as independent runs, experiments/rqn_validation.py).
    Under dp-server / dp-client / clip each client's update is clipped to ``clip_norm``
    before the (uniform) mean and, with noise, Gaussian noise of std
    ``noise_multiplier * clip_norm / sampled`` is added to the mean, as the Flower
    wrappers do (the noise from a generator seeded by ``seed`` and the round)."""
    fed, d = scenario.federation, scenario.data
    try:
        clients = partition_ids(ids, data.y[ids], fed.num_clients, d.partitioner, seed,
                                alpha=d.alpha, min_partition_size=d.min_partition_size,
                                classes_per_client=d.classes_per_client)
    except ScenarioError as exc:
        raise ScenarioError(f"reference models ({len(ids)} samples each): {exc}") from None
    defense = get_defense(scenario.defense.kind)
    dp = defense.local_dp(scenario.defense)
    model = model_for(scenario.model, data, seed=seed)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _, sampled = fed.sampled_clients()
    rng = np.random.default_rng([seed, 31])
    for rnd in range(1, fed.rounds + 1):
        chosen = (range(fed.num_clients) if sampled >= fed.num_clients
                  else np.sort(rng.choice(fed.num_clients, size=sampled, replace=False)))
        states, weights = [], []
        for c in chosen:
            model.load_state_dict(state)
            res = train_local(model, data.x, data.y, clients[c], scenario.train,
                              seed=client_seed(seed, rnd, int(c)), device=device, dp=dp)
            states.append({k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
            weights.append(1.0 if defense.uniform_weights else float(res.num_examples))
        if defense.wrapper is not None:
            clip = float(scenario.defense.options["clip_norm"])
            states = [_clip_update(s, state, clip) for s in states]
        state = _average(states, weights)
        sigma = defense.noise_multiplier(scenario.defense) if defense.wrapper else 0.0
        if sigma > 0:
            noise = np.random.default_rng([seed, rnd, 0xD9])
            state = _add_noise(state, sigma * clip / len(states), noise)
        if trajectory is not None:
            trajectory.append({k: v.clone() for k, v in state.items()})
    return state


def _cache_key(scenario: Scenario, ids: np.ndarray, seed: int) -> str:
    sec = scenario.sections()
    recipe = {t: sec[t] for t in ("data", "canaries", "model", "federation", "defense")}
    if scenario.audit.dp.canaries:  # the DP audit's canaries change the data
        recipe["audit.dp"] = sec["audit.dp"]
    recipe["train"] = {k: v for k, v in sec["train"].items() if k != "device"}
    recipe["scenario_seed"] = scenario.seed
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
        """results.json ``references``."""
        return {"models": len(self.states),
                "mode": "online" if self.plan.in_mask is not None else "offline",
                "trained": self.trained, "from_cache": self.cached,
                "train_seconds": self.seconds, "cache_dir": str(self.cache_dir),
                "train_size": [int(len(i)) for i in self.plan.train_ids],
                "split": self.split.summary()}


def load_or_train(scenario: Scenario, data: FederatedData, split: AttackSplit,
                  audit_ids: np.ndarray, device: torch.device,
                  step: Callable[[int, int, str], None] | None = None) -> References:
    """Every reference of the scenario, from the cache when there, else trained and
    cached (each one as soon as it is trained, so an interrupted run keeps them)."""
    plan = plan_references(scenario, split, audit_ids)
    root = cache_root() / "references"
    states, trained, cached, t0 = [], 0, 0, time.perf_counter()
    n = len(plan.train_ids)
    for k, (ids, seed) in enumerate(zip(plan.train_ids, plan.seeds)):
        path = root / f"{_cache_key(scenario, ids, seed)}.pt"
        if step is not None:
            step(k, n, "cached" if path.is_file() else "training")
        state = None
        if path.is_file():
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
                cached += 1
            except Exception as exc:  # noqa: BLE001 - a damaged cache entry is retrained
                log.warning("reference cache %s unreadable (%s); retraining", path, exc)
        if state is None:
            state = train_reference(scenario, data, ids, seed, device)
            bad = [name for name, v in state.items() if v.is_floating_point()
                   and not bool(torch.isfinite(v).all())]
            if bad:
                raise ScenarioError(f"reference model {k + 1} of {n} diverged (non-finite "
                                    f"{bad[0]!r}); lower train.lr or the defense's noise")
            trained += 1
            try:
                root.mkdir(parents=True, exist_ok=True)
                atomic_torch_save(state, path)
            except OSError as exc:
                log.warning("cannot cache reference model under %s: %s", root, exc)
        states.append(state)
    if step is not None:
        step(n, n, "done")
    seconds = time.perf_counter() - t0
    log.info("reference models: %d trained, %d from the cache (%s), %.1f s", trained,
             cached, root, seconds)
    return References(states, plan, split, trained, cached, seconds, root)


def reference_signals(refs: References, data: FederatedData, audit_ids: np.ndarray,
                      model: torch.nn.Module, device: torch.device, batch_size: int,
                      quantizer: str | None = None) -> ReferenceSignals:
    """The references' outputs on ``audit_ids`` (in that order) and on the population,
    each reference quantized with ``quantizer`` first when the target is a quantized
    release.  Probabilities come through :class:`attacks.oracle.Oracle`, the same path as
    the target's."""
    pos = np.searchsorted(refs.plan.audit_ids, audit_ids)
    ok = pos < len(refs.plan.audit_ids)
    if not (np.all(ok) and np.array_equal(refs.plan.audit_ids[pos], audit_ids)):
        raise ValueError("audit ids differ from those the references were planned for")
    pop = refs.split.population
    probs, pop_probs = [], []
    for state in refs.states:
        model.load_state_dict(quantize(state, quantizer) if quantizer else state)
        oracle = Oracle(model, batch_size=batch_size, device=device)
        probs.append(oracle.predict_proba(data.x[audit_ids]))
        pop_probs.append(oracle.predict_proba(data.x[pop]) if len(pop)
                         else np.zeros((0, data.num_classes)))
    mask = None if refs.plan.in_mask is None else refs.plan.in_mask[:, pos]
    return ReferenceSignals(np.stack(probs).astype(np.float64), mask, data.x[pop],
                            data.y[pop], np.stack(pop_probs).astype(np.float64))
