"""The typed products the audit's stages hand each other through the
:class:`~fedaudit.audit.context.AuditContext`: what a target's attacks gave
(:class:`TargetResult`, :class:`ScoreRows`), the quantization stage's releases
(:class:`QuantizedRelease`) and the curious server's view (:class:`ServerView`).

A later stage reads these, never another stage's results.json entries: results.json is an
output, each stage writing its own entries from its products (``as_dict`` / ``entry``
below give their results.json form).  The reference models are
:class:`fedaudit.audit.reference_models.References`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attacks.membership import AttackOutcome
from attacks.membership.registry import needs_references
from fedaudit.audit.targets.base import Target
from fedaudit.metrics import MembershipMetrics
from fedaudit.quant import RqnRuns

__all__ = ["ClientView", "QuantizedRelease", "ScoreRows", "ServerView", "TargetResult",
           "metrics_entry"]


def metrics_entry(m: MembershipMetrics | None) -> dict[str, float]:
    """The results.json form of one attack's metrics (``{}`` when there are none: the
    scored samples held a single class)."""
    return m.as_dict() if m is not None else {}


@dataclass(frozen=True, eq=False)
class ScoreRows:
    """Parallel rows of scores.npz: one target, one method, one client's samples (``client``
    -1 for rows pooled over the clients)."""

    target: str
    method: str
    sample_id: np.ndarray
    client: np.ndarray
    member: np.ndarray
    score: np.ndarray


@dataclass(frozen=True, eq=False)
class TargetResult:
    """One target's attacks (:func:`fedaudit.audit.attack_loop.attack`).

    ``outcomes``: per method, its :class:`attacks.membership.AttackOutcome` on the scored
    samples ``ids`` (membership ``member``), pooled metrics included; ``per_client``: per
    method, each client's metrics on its own set (targets scored on every client with
    ``per_client``; empty otherwise); ``reference_models``: how many reference models
    the reference attacks had (None: none); ``rows``: the scores.npz rows."""

    target: Target
    ids: np.ndarray
    member: np.ndarray
    outcomes: Mapping[str, AttackOutcome]
    per_client: Mapping[str, tuple[MembershipMetrics, ...]] = field(default_factory=dict)
    reference_models: int | None = None
    rows: tuple[ScoreRows, ...] = ()

    def pooled_metrics(self) -> dict[str, MembershipMetrics | None]:
        """method -> its pooled metrics (None: the samples held a single class)."""
        return {m: o.metrics for m, o in self.outcomes.items()}

    def metrics(self) -> dict[str, dict[str, float]]:
        """method -> its pooled metrics, in results.json form."""
        return {m: metrics_entry(o.metrics) for m, o in self.outcomes.items()}

    def entries(self) -> dict[str, dict[str, Any]]:
        """method -> its results.json entry: the pooled metrics, queries and seconds per
        sample, the number of reference models (reference attacks) and what the attack
        reported (``info``)."""
        out = {}
        for m, o in self.outcomes.items():
            entry: dict[str, Any] = {**metrics_entry(o.metrics),
                                     "queries_per_sample": o.queries_per_sample,
                                     "seconds_per_sample": o.seconds_per_sample}
            if needs_references(m) and self.reference_models is not None:
                entry["reference_models"] = self.reference_models
            entry.update(o.info)
            out[m] = entry
        return out

    def client_metrics(self, client: int) -> dict[str, dict[str, float]]:
        """method -> client ``client``'s metrics, in results.json form."""
        return {m: metrics_entry(per[client]) for m, per in self.per_client.items()}


@dataclass(frozen=True, eq=False)
class QuantizedRelease:
    """One quantizer's release of the final model (the quantization stage): its state,
    its r_Qn over the training runs (:class:`fedaudit.quant.RqnRuns`), how many trajectory
    candidates it was estimated from, and its test accuracy and loss."""

    quantizer: str
    bits: Any
    sparsity: Any
    state: dict[str, torch.Tensor]
    rqn: RqnRuns
    n_candidates: int
    test_accuracy: float
    test_loss: float

    @property
    def n_distinct(self) -> int:
        return sum(res.n_distinct for res in self.rqn.runs)

    @property
    def n_kept(self) -> int:
        return sum(len(k) for k in self.rqn.kept)

    def entry(self) -> dict[str, Any]:
        """Its results.json ``quantization[]`` entry (``attacks`` stays empty unless the
        ``quantized`` target attacks it)."""
        notes = sorted({res.note for res in self.rqn.runs if res.note})
        median = self.rqn.median
        return {"quantizer": self.quantizer, "bits": self.bits, "sparsity": self.sparsity,
                "rqn": median, "rqn_note": "; ".join(notes) if median == math.inf else None,
                "rqn_runs": [float(v) for v in self.rqn.values],
                "rqn_q25": self.rqn.quantile(0.25), "rqn_q75": self.rqn.quantile(0.75),
                "n_candidates": self.n_candidates, "n_distinct": self.n_distinct,
                "n_kept": self.n_kept, "test_accuracy": self.test_accuracy,
                "test_loss": self.test_loss, "attacks": {}}


@dataclass(frozen=True)
class ClientView:
    """One client's models as the server received them, attacked: per attacked round, each
    method's metrics; with several rounds, the server-view attacks' scores averaged over
    them (``combined``)."""

    client: int
    rounds: Mapping[int, Mapping[str, MembershipMetrics | None]]
    combined: MembershipMetrics | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"client": self.client, "rounds": {
            str(r): {m: metrics_entry(v) for m, v in ms.items()} for r, ms in self.rounds.items()}}
        if self.combined is not None:
            out["fedmia_combined"] = metrics_entry(self.combined)
        return out


@dataclass(frozen=True)
class ServerView:
    """The curious server's attacks (the ``clients`` target kind): the rounds attacked
    (``attack.rounds``), what the server sees of an update (the defense's words), each
    client's :class:`ClientView`, each method's metrics pooled over the clients (each on
    its last attacked model; server-view attacks combined over rounds) and the notes."""

    rounds: str | list[int]
    model_seen: str
    clients: tuple[ClientView, ...]
    pooled: Mapping[str, MembershipMetrics]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """results.json ``server_view``."""
        return {"rounds": self.rounds, "model_seen": self.model_seen,
                "clients": [c.as_dict() for c in self.clients],
                "pooled": {m: metrics_entry(v) for m, v in self.pooled.items()},
                "notes": list(self.notes)}
