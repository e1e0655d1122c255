"""results.json up to the post-training sections: data, model, rounds, clients, warnings,
defense accounting, canary ranks (Flower-free: it reads what the round recorder kept)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import percentileofscore

from fedaudit.audit.probing import run_probes
from fedaudit.audit.sets import attack_warnings
from fedaudit.data import FederatedData
from fedaudit.defenses import defense_summary
from fedaudit.rundir import atomic_save_npz
from fedaudit.rundir.layout import GNQ_SAMPLES_NAME
from fedaudit.scenario import Scenario
from fedaudit.version import __version__

log = logging.getLogger("fedaudit")


def assemble_results(scenario: Scenario, data: FederatedData, recorder,
                     run_dir: Path) -> dict[str, Any]:
    """results.json up to the post-training sections; writes gnq_samples.npz."""
    last = recorder.rounds[-1]
    n_clients = scenario.federation.num_clients
    clients: list[dict[str, Any]] = []
    per_round = {c: [] for c in range(n_clients)}
    for rec in recorder.rounds:  # the update-gnq probe's (absent when it did not run)
        for c in range(n_clients):
            per_round[c].append(rec.get("gnq_update", {}).get(str(c)))
    samples = recorder.client_gnq()  # client-side per-sample GNQ, all rounds
    if samples is not None:
        samples["canary"] = data.canary[samples["sample_id"]]
        atomic_save_npz(run_dir / GNQ_SAMPLES_NAME, **samples)
    for c in range(n_clients):
        ups = per_round[c]
        gnq: dict[str, Any] = {"update_per_round": ups,
                               "update_total": float(sum(u for u in ups if u is not None))
                               if any(u is not None for u in ups) else None}
        if samples is not None:
            mine = samples["score"][samples["client"] == c]
            gnq["sample_mean"] = float(mine.mean()) if len(mine) else None
            gnq["sample_max"] = float(mine.max()) if len(mine) else None
        clients.append({"client": c, "num_examples": int(len(data.clients[c])),
                        **_histograms(data, data.clients[c]), "gnq": gnq, "attacks": {}})
    results: dict[str, Any] = {
        "fedaudit_version": __version__,
        "seed": scenario.seed,
        "scenario": scenario.sections(),
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
        "warnings": [{"round": None, "message": n}
                     for n in (*data.notes, *attack_warnings(scenario))]
        + [{"round": r["round"], "message": r["warning"]}
           for r in recorder.rounds if r.get("warning")],
    }
    if data.text is not None:
        results["data"]["text"] = {"seq_len": int(data.x.shape[1]),
                                   "roles": len(data.text.roles),
                                   "speeches": int(len(np.unique(data.text.speech)))}
    if samples is not None and data.canary.any():
        results["canaries"] = canary_ranks(samples)
    summaries = {cls.name: cls.summary(recorder.rounds) for cls in run_probes(scenario)}
    if any(v is not None for v in summaries.values()):
        results["probes"] = {k: v for k, v in summaries.items() if v is not None}
    return results


def _histograms(data: FederatedData, ids: np.ndarray) -> dict[str, Any]:
    """A client's ``label_histogram`` (images: samples per class; text: target tokens
    per character of the vocabulary, over all its sequences) and, for text, ``roles``:
    its sequences per speaking role (``"-"``: text of no role)."""
    out: dict[str, Any] = {"label_histogram": np.bincount(
        data.y[ids].ravel(), minlength=data.num_classes).tolist()}
    if data.text is not None:
        spk, counts = np.unique(data.text.speaker[ids], return_counts=True)
        out["roles"] = {(data.text.roles[r] if r >= 0 else "-"): int(n)
                        for r, n in zip(spk, counts)}
    return out


def add_defense_results(results: dict, scenario: Scenario, recorder, *,
                        n_extra: int = 0) -> None:
    """results.json ``defense`` (:func:`fedaudit.defenses.defense_summary`: kind,
    parameters, epsilon, delta, accounting, notes) and, under dp-sgd, each client's
    ``dp`` entry (epsilon, steps, sample rate).  Epsilon is computed from rounds.jsonl, so a
    resumed run accounts its earlier rounds too."""

    summary = defense_summary(scenario, recorder.rounds,
                              num_sampled=scenario.federation.sampled_clients()[1],
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
