"""``client-gnq``: the clients' in-run GNQ, as each reply reports it beside its model (every
sample of every local batch scored by the client, docs/algorithms.md section 1): kept per
round in ``gnq/round-NNNN.npz`` (``sample_id, client, epoch, score``; an extra training
seed's under ``gnq/seed-S/``).  :func:`read_client_gnq` gathers every round's file
(gnq_samples.npz's rows, without the canary column)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from fedaudit.probes.base import RECORDS, Probe, RoundRecord, RoundView, register_probe
from fedaudit.rundir.layout import gnq_round_path

__all__ = ["EPOCHS", "IDS", "SCORES", "ClientGnq", "read_client_gnq"]

#: the reply's audit-record keys the client writes (:mod:`strategies.wire` lists them too)
IDS, SCORES, EPOCHS = "gnq-ids", "gnq-scores", "gnq-epochs"


@register_probe
class ClientGnq(Probe):
    name = "client-gnq"
    describe = "the clients' reported in-run per-sample GNQ"
    key = "audit.gnq.client = true"
    reads = frozenset({RECORDS})
    every_trajectory = True

    @classmethod
    def enabled(cls, scenario):
        return scenario.audit.gnq.client

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        parts = []
        for r in view.replies:
            if IDS not in r.records:
                continue
            ids = np.asarray(r.records[IDS], dtype=np.int64)
            if not len(ids):
                continue
            scores = np.asarray(r.records[SCORES], dtype=np.float64)
            epochs = (np.asarray(r.records[EPOCHS], dtype=np.int64) if EPOCHS in r.records
                      else None)
            if epochs is None or len(epochs) != len(ids):
                epochs = np.zeros(len(ids), np.int64)  # 0: not reported
            parts.append((r.client, ids, scores, epochs))
        if not parts:
            return
        record.save_arrays(
            gnq_round_path(record.run_dir, record.round, record.subdir),
            sample_id=np.concatenate([p[1] for p in parts]).astype(np.int64),
            client=np.concatenate([np.full(len(p[1]), p[0]) for p in parts]),
            epoch=np.concatenate([p[3] for p in parts]).astype(np.int64),
            score=np.concatenate([p[2] for p in parts]).astype(np.float64))


def read_client_gnq(run_dir: Path, rounds: Iterable[int],
                    subdir: str = "") -> dict[str, np.ndarray] | None:
    """All ``rounds``' client-side per-sample GNQ (gnq_samples.npz layout, no canary): one
    row per time a sample was scored -- each local epoch (under DP-SGD's Poisson sampling,
    each time it was drawn) -- with its 1-based local ``epoch``; None when none was kept."""
    cols: dict[str, list] = {"sample_id": [], "client": [], "round": [], "epoch": [],
                             "score": []}
    for r in rounds:
        path = gnq_round_path(run_dir, r, subdir)
        if not path.exists():
            continue
        with np.load(path) as npz:
            for key in ("sample_id", "client", "score"):
                cols[key].append(npz[key])
            cols["round"].append(np.full(len(npz["score"]), r))
            cols["epoch"].append(npz["epoch"] if "epoch" in npz.files
                                 else np.zeros(len(npz["score"]), np.int64))
    if not cols["score"]:
        return None
    return {k: np.concatenate(v) for k, v in cols.items()}
