"""Server-side probes: what the server measures and keeps of each round, one small class per
concern (update norms, update GNQ, the clients' in-run GNQ reports, the clients' models as
received, the DP audit's gradient canaries), run by the auditing strategy
(:class:`strategies.auditing.AuditingStrategy`) the way each Flower DP wrapper adds one
concern around ``aggregate_train``.

A :class:`Probe` declares

- what of a round it reads (:attr:`Probe.reads`, a subset of :data:`VIEWS`): each client's
  update as received (``updates``), each reply's audit records, the client-reported batch
  metadata beside the model (``records``), or the round's aggregate (``aggregate``).  An
  aggregation that hides individual updates from the server (secure aggregation) makes
  validation refuse every probe, target kind and stage that needs what it hides
  (:func:`fedaudit.audit.probing.check_server_view`);
- when it runs by its own scenario keys (:meth:`Probe.enabled`); a probe is also run when a
  listed attack target kind or an enabled audit stage asks for it by name
  (``TargetKind.probes`` / ``Stage.probes``);
- whether it runs on every training run of a scenario or only the released one
  (:attr:`Probe.every_trajectory`: the extra seeds of ``audit.quantization.seeds``).

A probe is instantiated for each training run with a :class:`ProbeRun` and sees, each
round, every valid reply (:meth:`Probe.on_reply`, in partition-id order, before the wrapped
strategy clips, noises or aggregates anything) and then the round as a whole
(:meth:`Probe.on_round`, after aggregation).  What it keeps goes through the round's
:class:`RoundRecord`: keys of the round's ``rounds.jsonl`` line and files of the run
directory, written atomically before that line is appended (a round counts as finished
exactly when its line is there, so ``--resume`` never sees half a round).  What results.json
keeps of it is its :meth:`Probe.summary` of those lines (``probes.<name>``; none for the
built-in probes, whose records feed ``clients[].gnq`` and the audit stages).

A new per-update measurement is one file: a subclass of :class:`Probe` with
``@register_probe``, in this folder or in a notebook cell.  Flower-free: the strategy turns
Flower's messages into :class:`Reply` objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedaudit.registry import Registry
from fedaudit.rundir import atomic_save_npz, atomic_torch_save
from fedaudit.scenario import Scenario

if TYPE_CHECKING:
    import torch

__all__ = ["AGGREGATE", "PROBES", "Probe", "ProbeRun", "RECORDS", "ROUND_KEYS", "Reply",
           "RoundRecord", "RoundView", "UPDATES", "VIEWS", "register_probe"]

#: each client's update as the server received it
UPDATES = "updates"
#: each reply's audit records: what the client reported beside its model (batch metadata)
RECORDS = "records"
#: the round's aggregate (the new global model)
AGGREGATE = "aggregate"
#: what a probe may read of a round, with the words validation messages use
VIEWS: Mapping[str, str] = {UPDATES: "each client's update", RECORDS: "each client's "
                            "audit records", AGGREGATE: "the round's aggregate"}


#: the rounds.jsonl keys the round recorder writes itself (a probe's entry may not take one)
ROUND_KEYS = ("round", "test_accuracy", "test_loss", "train_loss", "clients", "failures",
              "failure_reasons", "aggregated", "note", "warning", "dp_steps", "dp_sample_rate")


def _flat(arrays: Mapping[str, np.ndarray], keys: list[str]) -> np.ndarray:
    return np.concatenate([arrays[k].astype(np.float64, copy=False).ravel() for k in keys])


@dataclass(frozen=True)
class Reply:
    """One valid reply of a round, as the server received it."""

    round: int
    #: the client's partition id
    client: int
    num_examples: int
    train_loss: float
    #: the client's model as received, by state_dict key (decoded once, read-only use)
    model: Mapping[str, np.ndarray]
    #: the global model the client trained from, by state_dict key (the round's start)
    start: Mapping[str, np.ndarray]
    #: the reply's audit records (key -> value as sent; the client-side GNQ's scores ...)
    records: Mapping[str, Any] = field(default_factory=dict)

    def update(self, key: str) -> np.ndarray:
        """u_c = w_c - w_global of one state_dict entry, in float64."""
        return self.model[key].astype(np.float64) - self.start[key].astype(np.float64)

    @cached_property
    def flat_update(self) -> np.ndarray:
        """The whole update u_c = w_c - w_global as one float64 vector (the global model's
        key order)."""
        keys = list(self.start)
        return _flat(self.model, keys) - _flat(self.start, keys)


@dataclass(frozen=True)
class RoundView:
    """A round as the server ends it: the valid replies (partition-id order) and the
    aggregate that replaced the global model, decoded when a probe of the run reads it
    (None: the round kept the previous model, or no probe reads the aggregate)."""

    round: int
    replies: tuple[Reply, ...]
    aggregate: Mapping[str, np.ndarray] | None


@dataclass
class RoundRecord:
    """What the probes keep of one round: keys of its ``rounds.jsonl`` line (:meth:`entry`)
    and files under the run directory (:meth:`save_arrays`, :meth:`save_state`, written at
    once and atomically; the round recorder appends the line after them)."""

    run_dir: Path
    round: int
    #: the training run's sub-folder ("" for the released run, ``seed-S`` for an extra seed)
    subdir: str = ""
    entries: dict[str, Any] = field(default_factory=dict)

    def entry(self, key: str, value: Any) -> None:
        """Add ``key`` to the round's rounds.jsonl line (a key may be set once)."""
        if key in ROUND_KEYS:
            raise ValueError(f"rounds.jsonl key {key!r} is the round recorder's own; "
                             f"a probe's key must differ from {', '.join(ROUND_KEYS)}")
        if key in self.entries:
            raise ValueError(f"rounds.jsonl key {key!r} is set twice in round {self.round}")
        self.entries[key] = value

    def save_arrays(self, path: Path, **arrays: np.ndarray) -> None:
        """Parallel arrays as a compressed .npz (``path`` from :mod:`fedaudit.rundir.layout`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_npz(path, **arrays)

    def save_state(self, path: Path, state: Mapping[str, "torch.Tensor"]) -> None:
        """A model's state_dict (``torch.save``; load with ``weights_only=True``)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_torch_save(dict(state), path)


@dataclass(frozen=True)
class ProbeRun:
    """One training run the probes watch."""

    scenario: Scenario
    run_dir: Path
    #: "" for the released run, ``seed-S`` for an extra training seed
    subdir: str = ""
    #: a model of the scenario (its architecture: parameter names, shapes and order)
    model: Any = None


class Probe:
    """One concern the server adds to every round.  Subclasses set :attr:`name`,
    :attr:`describe` and :attr:`reads` and override :meth:`on_reply` and/or
    :meth:`on_round`; an instance lives for one training run (:attr:`run`)."""

    #: the registry key (what target kinds and stages ask for)
    name: ClassVar[str]
    #: one line: what it measures or keeps
    describe: ClassVar[str] = ""
    #: the scenario key that turns it on (messages); "" when only asked for by others
    key: ClassVar[str] = ""
    #: what of a round it reads (keys of :data:`VIEWS`)
    reads: ClassVar[frozenset[str]] = frozenset({UPDATES})
    #: also on the extra training runs (``audit.quantization.seeds``), not only the released
    every_trajectory: ClassVar[bool] = False

    @classmethod
    def enabled(cls, scenario: Scenario) -> bool:
        """Whether the scenario's own keys turn the probe on (default: only when a target
        kind or a stage asks for it)."""
        return False

    @classmethod
    def check(cls, scenario: Scenario) -> str | None:
        """What the probe needs of the scenario when it runs (a one-line message, or None)."""
        return None

    @classmethod
    def summary(cls, rounds: list[dict[str, Any]]) -> Any:
        """What results.json keeps of the probe (under ``probes.<name>``), from the released
        run's rounds.jsonl records; None (the default): nothing -- the built-in probes'
        records feed ``clients[].gnq``, the report and the audit stages instead."""
        return None

    def __init__(self, run: ProbeRun) -> None:
        self.run = run

    def on_reply(self, reply: Reply, record: RoundRecord) -> None:
        """Each valid reply, in partition-id order, before aggregation."""

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        """The round after aggregation."""


def _check(name: str, cls: Any, meta: dict) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Probe)):
        raise TypeError(f"probe {name!r} must be a Probe subclass")
    unknown = sorted(set(cls.reads) - set(VIEWS))
    if unknown or not cls.reads:
        raise TypeError(f"probe {name!r}: reads = {sorted(cls.reads)!r}; allowed: a "
                        f"non-empty subset of {', '.join(VIEWS)}")


#: name -> probe class, in registration order (the order probes run and record)
PROBES: Registry[str, type[Probe]] = Registry("probe", name_pattern=r"[a-z][a-z0-9_-]*",
                                              check=_check)


def register_probe(cls: type[Probe] | None = None, *, replace: bool = False):
    """Class decorator: register a :class:`Probe` subclass under its ``name`` (a taken name
    needs ``replace=True``)."""
    def add(c: type[Probe]) -> type[Probe]:
        PROBES.register(c.name, c, replace=replace)
        return c
    return add if cls is None else add(cls)
