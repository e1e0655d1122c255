"""The federated attacker's positions (docs/algorithms.md section 9).

- **Outsider**: queries the final global model (``attack.targets`` ``global``; as before).
- **Insider**: sees the global model after every round (a client does): target ``rounds``,
  the single-model attacks on each round's global checkpoint, pooled over the clients'
  audit sets.
- **Curious server**: receives every client's local model each round: target ``clients``,
  each client's model as the server received it (before the wrapped strategy clips or
  noises anything -- under ``dp-client`` the client already clipped it, under ``dp-sgd``
  it is the DP-trained model) attacked on that client's own members against its
  class-matched non-members, with the single-model attacks and FedMIA (the other clients'
  models of the round as OUT references).

Which rounds: ``attack.rounds`` -- ``last`` (each client's last participating round),
``all``, or a list.  The server keeps the received client models on disk under
``client_models/round-NNNN/`` only for the rounds that can still be asked for (with
``last``, a round's folder goes as soon as each of its clients has trained again).

FedMIA over several rounds: the mean over the rounds the server saw of the per-round
scores ``log Pr[Z <= phi]`` (the authors' "averaged log LiRA"; the mean, not the sum,
keeps clients seen in different numbers of rounds on one scale for the pooled metrics),
reported as ``fedmia_combined``.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.membership import evaluate_attacks
from attacks.oracle import Oracle
from attacks.reference import ReferenceSignals
from attacks.registry import needs_references, server_view, trains_references
from fedaudit.attack_sets import (attack_options, client_audit_set, pooled_audit_set,
                                  result_metrics, scored_ids)
from fedaudit.data import FederatedData
from fedaudit.defenses import get_defense
from fedaudit.metrics import membership_metrics
from fedaudit.rundir import atomic_torch_save, load_checkpoint
from fedaudit.scenario import Scenario

log = logging.getLogger("fedaudit")

CLIENT_MODELS = "client_models"
#: fewest other clients in a round for FedMIA's per-sample Gaussian
FEDMIA_MIN_OTHERS = 3

__all__ = ["attack_positions", "client_model_rounds", "drop_unfinished_rounds",
           "keeps_client_models", "round_attacks", "save_client_models", "server_view_attacks"]


def keeps_client_models(scenario: Scenario) -> bool:
    return scenario.attack.enabled and "clients" in scenario.attack.targets


def _round_dir(run_dir: Path, round_: int) -> Path:
    return run_dir / CLIENT_MODELS / f"round-{round_:04d}"


def client_model_rounds(run_dir: Path) -> dict[int, list[int]]:
    """round -> the clients whose received model is on disk for it."""
    out: dict[int, list[int]] = {}
    root = run_dir / CLIENT_MODELS
    for d in sorted(root.glob("round-*")) if root.is_dir() else []:
        m = re.fullmatch(r"round-(\d+)", d.name)
        clients = sorted(int(p.stem.split("-")[1]) for p in d.glob("client-*.pt"))
        if m and clients:
            out[int(m.group(1))] = clients
    return out


def save_client_models(run_dir: Path, round_: int, states: dict[int, dict],
                       policy: str | tuple[int, ...]) -> None:
    """Keep the round's received client models when ``policy`` (``attack.rounds``) can ask
    for them; with ``last``, drop the earlier rounds whose clients all trained again."""
    if not isinstance(policy, str) and round_ not in policy:
        return
    d = _round_dir(run_dir, round_)
    d.mkdir(parents=True, exist_ok=True)
    for c, state in states.items():
        atomic_torch_save(state, d / f"client-{c:04d}.pt")
    if policy != "last":
        return
    rounds = client_model_rounds(run_dir)
    latest = {c: r for r, cs in sorted(rounds.items()) for c in cs}
    for r, cs in rounds.items():
        if r < round_ and all(latest[c] > r for c in cs):
            shutil.rmtree(_round_dir(run_dir, r), ignore_errors=True)


def drop_unfinished_rounds(run_dir: Path, finished: int) -> None:
    """Resuming after ``finished`` rounds: the client models saved for a later (unfinished)
    round are not part of the run; remove them so they are never attacked or used as
    FedMIA's references."""
    for r in client_model_rounds(run_dir):
        if r > finished:
            shutil.rmtree(_round_dir(run_dir, r), ignore_errors=True)


def _selected(rounds: list[int], policy: str | tuple[int, ...]) -> list[int]:
    if policy == "last":
        return rounds[-1:]
    if policy == "all":
        return rounds
    return [r for r in rounds if r in policy]


def _single_model_methods(scenario: Scenario) -> list[str]:
    """The attacks that need nothing but the target (no reference models)."""
    return [m for m in scenario.attack.methods if not needs_references(m)]


def _skipped_note(scenario: Scenario) -> list[str]:
    """The reference-model attacks listed (lira, rmia) do not run on client models."""
    skipped = [m for m in scenario.attack.methods if trains_references(m)]
    if not skipped:
        return []
    return [f"{', '.join(skipped)} not run on the clients target (reference models are "
            "trained for the final global model and its quantized releases only)"]


class _RoundOutputs:
    """Each kept client model's probabilities on every audit sample, computed once per
    round on first use (FedMIA scores a client with the other clients' models of its
    round: without this every model would be loaded again for each client)."""

    def __init__(self, run_dir: Path, ids: np.ndarray, data: FederatedData,
                 model: torch.nn.Module, device: torch.device, batch_size: int) -> None:
        self.run_dir, self.ids, self.x = run_dir, ids, data.x[ids]
        self.model, self.device, self.batch_size = model, device, batch_size
        self._round: int | None = None
        self._probs: dict[int, np.ndarray] = {}

    def of(self, round_: int, client: int, sample_ids: np.ndarray) -> np.ndarray:
        if round_ != self._round:  # one round at a time: bounded memory
            self._round, self._probs = round_, {}
        if client not in self._probs:
            self.model.load_state_dict(
                load_checkpoint(_round_dir(self.run_dir, round_) / f"client-{client:04d}.pt"))
            oracle = Oracle(self.model, batch_size=self.batch_size, device=self.device)
            self._probs[client] = oracle.predict_proba(self.x)
        return self._probs[client][np.searchsorted(self.ids, sample_ids)]


def server_view_attacks(scenario: Scenario, data: FederatedData, sets: list[dict],
                        run_dir: Path, model: torch.nn.Module, device: torch.device,
                        progress=None) -> tuple[dict[str, Any], list[tuple]]:
    """The curious server: every client's received model at the selected rounds, attacked
    on that client's audit set.  Returns (results.json ``server_view``, scores.npz rows)."""
    cfg = scenario.attack
    available = client_model_rounds(run_dir)
    single = _single_model_methods(scenario)
    server = [m for m in cfg.methods if server_view(m)]
    options = attack_options(scenario)
    notes = _skipped_note(scenario)
    outputs = _RoundOutputs(run_dir, scored_ids(sets), data, model, device, cfg.batch_size)
    selected = {c: _selected(sorted(r for r, cs in available.items() if c in cs), cfg.rounds)
                for c in range(len(sets))}
    clients = []
    rows: dict[int, list[tuple]] = {c: [] for c in range(len(sets))}  # client-major order
    pooled: dict[str, tuple[list, list]] = {}
    total, done = sum(len(rs) for rs in selected.values()), 0
    per_client: dict[int, dict] = {c: {"client": c, "rounds": {}} for c in range(len(sets))}
    last: dict[int, dict[str, np.ndarray]] = {c: {} for c in range(len(sets))}
    combined = {c: [] for c in range(len(sets))}
    # round by round, so that each round's client models are loaded once
    for r in sorted({r for rs in selected.values() for r in rs}):
        for c, s in enumerate(sets):
            if r not in selected[c]:
                continue
            if progress is not None:
                progress.step("server view", done, total, f"round {r}, client {c}")
            done += 1
            sid, mem = client_audit_set(s)
            others = [o for o in available[r] if o != c]
            methods, signals = list(single), None
            if server and len(others) >= FEDMIA_MIN_OTHERS:
                signals = ReferenceSignals(
                    np.stack([outputs.of(r, o, sid) for o in others]), None, data.x[:0],
                    data.y[:0], np.zeros((len(others), 0, data.num_classes)))
                methods += server
            elif server:
                note = (f"FedMIA needs >= {FEDMIA_MIN_OTHERS} other clients in a round; "
                        f"client {c} round {r} had {len(others)}")
                if note not in notes:
                    notes.append(note)
            if not methods:
                continue
            model.load_state_dict(load_checkpoint(_round_dir(run_dir, r) / f"client-{c:04d}.pt"))
            oracle = Oracle(model, batch_size=cfg.batch_size, device=device)
            raw = evaluate_attacks(oracle, data.x[sid], data.y[sid], mem, methods, options,
                                   references=signals)
            per_client[c]["rounds"][str(r)] = {m: result_metrics(v["metrics"])
                                               for m, v in raw.items()}
            for m, v in raw.items():
                rows[c].append((f"client-model:r{r}", m, sid, np.full(len(sid), c), mem,
                                v["scores"]))
                last[c][m] = v["scores"]
                if server_view(m):
                    combined[c].append(v["scores"])
    for c, s in enumerate(sets):
        _, mem = client_audit_set(s)
        if len(combined[c]) > 1:
            mean = np.mean(combined[c], axis=0)
            per_client[c]["fedmia_combined"] = result_metrics(membership_metrics(mean, mem))
            last[c].update({m: mean for m in server})
        for m, sc in last[c].items():
            pooled.setdefault(m, ([], []))
            pooled[m][0].append(sc)
            pooled[m][1].append(mem)
        clients.append(per_client[c])
    if progress is not None:
        progress.step("server view", total, total, "done")
    out: dict[str, Any] = {
        "rounds": cfg.rounds if isinstance(cfg.rounds, str) else list(cfg.rounds),
        "model_seen": get_defense(scenario.defense.kind).server_sees,
        "clients": clients,
        "pooled": {m: result_metrics(membership_metrics(np.concatenate(sc), np.concatenate(mm)))
                   for m, (sc, mm) in pooled.items()},
        "notes": notes,
    }
    if not available:
        out["notes"].append("no client models were kept (a resumed run keeps only the "
                            "rounds trained after resuming)")
    return out, [row for c in range(len(sets)) for row in rows[c]]


def round_attacks(scenario: Scenario, data: FederatedData, sets: list[dict],
                  checkpoints: list[Path], model: torch.nn.Module,
                  device: torch.device) -> tuple[list[dict[str, Any]], list[tuple]]:
    """The insider: the global model after each selected round, the single-model attacks
    pooled over every client's audit set.  Returns (results.json ``round_attacks``, rows)."""
    cfg = scenario.attack
    methods = _single_model_methods(scenario)
    if not methods:
        return [], []
    rounds = _selected(list(range(1, len(checkpoints) + 1)), cfg.rounds)
    ids, mem = pooled_audit_set(sets)
    client = np.full(len(ids), -1)
    out, rows = [], []
    for r in rounds:
        model.load_state_dict(load_checkpoint(checkpoints[r - 1]))
        oracle = Oracle(model, batch_size=cfg.batch_size, device=device)
        raw = evaluate_attacks(oracle, data.x[ids], data.y[ids], mem, methods,
                               attack_options(scenario))
        out.append({"round": r, "attacks": {m: result_metrics(v["metrics"])
                                            for m, v in raw.items()}})
        rows += [(f"round:{r}", m, ids, client, mem, v["scores"]) for m, v in raw.items()]
    return out, rows


def _best(attacks: dict[str, dict]) -> tuple[str, dict] | None:
    scored = [(m, a) for m, a in attacks.items() if a.get("auc") is not None]
    return max(scored, key=lambda ma: ma[1]["auc"]) if scored else None


def attack_positions(results: dict[str, Any]) -> list[dict[str, Any]]:
    """results.json ``attack_positions``: per position, the best method's pooled AUC and
    TPR@1%FPR (best = highest AUC)."""
    rows = []

    def add(position: str, target: str, attacks: dict, **extra: Any) -> None:
        best = _best(attacks)
        if best:
            m, a = best
            rows.append({"position": position, "target": target, "best_method": m,
                         "auc": a["auc"], "tpr_at_1pct_fpr": a.get("tpr_at_1pct_fpr"), **extra})

    add("outsider", "final global model", results.get("attacks") or {})
    per_round = results.get("round_attacks") or []
    if per_round:
        best = max(((r["round"], *b) for r in per_round if (b := _best(r["attacks"]))),
                   key=lambda x: x[2]["auc"], default=None)
        if best:
            add("insider", "global model after each round", {best[1]: best[2]},
                round=best[0])
    sv = results.get("server_view") or {}
    if sv.get("pooled"):
        add("curious server", "each client's received model", sv["pooled"])
    return rows
