"""Attack targets: what an attacker queries, as one type (:class:`Target`) and a registry
of the kinds a scenario can list in ``attack.targets`` (:data:`TARGETS`).

A :class:`TargetKind` knows which models of a run it stands for (:meth:`~TargetKind.targets`:
the final global model, each quantized release, the global model after each selected
round, each client's model as the server received it), which attacks run on them, and
where their results go in results.json (:meth:`~TargetKind.record`).  The attack loop
(:func:`fedaudit.audit.attack_loop.attack`) treats every target alike: a target is one
column of the samples x models score matrix.  A new kind is one class with
``@register_target``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
import torch

from attacks.reference import ReferenceSignals
from attacks.registry import needs_references, server_view, trains_references
from fedaudit.audit.sets import result_metrics
from fedaudit.registry import Registry, instance_registrar
from fedaudit.scenario import Scenario

__all__ = ["TARGETS", "ScoreRows", "Target", "TargetKind", "TargetResult", "model_methods",
           "needs_model_method", "register_target", "selected_kinds", "selected_rounds",
           "single_model_methods", "uses_references"]


@dataclass(frozen=True)
class Target:
    """One model behind an oracle and the samples it is scored on.

    ``name`` is the ``target`` column of scores.npz (``global``, ``quantized:int8``,
    ``round:3``, ``client-model:r5``); ``load()`` gives the model's state; ``methods`` the
    attacks run on it.  ``client`` None: scored on every client's audit set (the distinct
    samples once, metrics pooled and, with ``per_client``, per client); a client id: on
    that client's set only.  ``references(ids)`` gives the reference signals of the
    reference attacks on the scored ids (None: the target has none)."""

    name: str
    kind: str
    load: Callable[[], dict[str, torch.Tensor]]
    methods: tuple[str, ...]
    client: int | None = None
    per_client: bool = True
    references: Callable[[np.ndarray], ReferenceSignals | None] | None = None
    round: int | None = None


@dataclass(frozen=True)
class ScoreRows:
    """Parallel rows of scores.npz: one target, one method, one client's samples (``client``
    -1 for rows pooled over the clients)."""

    target: str
    method: str
    sample_id: np.ndarray
    client: np.ndarray
    member: np.ndarray
    score: np.ndarray


@dataclass
class TargetResult:
    """One target's attacks: per method the scores on :attr:`ids` and the raw output of
    :func:`~attacks.membership.evaluate_attacks`; results.json's metrics; the score rows."""

    target: Target
    ids: np.ndarray
    member: np.ndarray
    raw: dict[str, dict[str, Any]]
    #: method -> pooled metrics with the method's cost (queries and seconds per sample)
    pooled: dict[str, dict[str, Any]]
    #: per client (targets scored on every client, with ``per_client``): method -> metrics
    clients: list[dict[str, dict[str, Any]]] = field(default_factory=list)
    rows: list[ScoreRows] = field(default_factory=list)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """method -> the pooled metrics alone."""
        return {m: result_metrics(v["metrics"]) for m, v in self.raw.items()}


class TargetKind:
    """A kind of target (``attack.targets`` lists kinds by :attr:`name`).  Its methods
    receive the run's :class:`fedaudit.audit.context.AuditContext` as ``ctx``."""

    #: the name in ``attack.targets``
    name: ClassVar[str]
    #: one line for the schema's help and the docs
    describe: ClassVar[str] = ""
    #: its targets are scored by the reference-model attacks (LiRA, RMIA): the run trains
    #: reference models when a listed kind says so
    references: ClassVar[bool] = False
    #: the federated attacker it stands for (``outsider``, ``insider``, ``curious server``)
    position: ClassVar[str] = "outsider"

    def methods(self, scenario: Scenario) -> tuple[str, ...]:
        """Which of ``attack.methods`` run on its targets (default: the attacks on a
        released model)."""
        return model_methods(scenario)

    def check(self, scenario: Scenario) -> str | None:
        """What the scenario must satisfy when it lists this kind (a message, or None)."""
        return None

    def probes(self, scenario: Scenario) -> tuple[str, ...]:
        """The server-side probes its targets need while training (:mod:`fedaudit.probes`,
        by name; e.g. ``client-models`` for the clients' models as received)."""
        return ()

    def targets(self, ctx: Any) -> list[Target]:
        """The models of this run that the kind stands for, in attack order."""
        raise NotImplementedError

    def record(self, ctx: Any, results: list["TargetResult"]) -> list["ScoreRows"]:
        """Write the kind's results.json entries from its targets' results; return the
        score rows to store, in scores.npz order (default: every row, target order)."""
        return [row for r in results for row in r.rows]


def _check(name: str, kind: Any, meta: dict) -> None:
    if not isinstance(kind, TargetKind):
        raise TypeError(f"target kind {name!r} must be a TargetKind instance")


#: name -> target kind, in registration order (the order the attacks stage runs them)
TARGETS: Registry[str, TargetKind] = Registry("attack target", name_pattern=r"[a-z][a-z0-9_-]*",
                                              check=_check)


register_target = instance_registrar(
    TARGETS, "name", """Class decorator: register an instance of a :class:`TargetKind`
    subclass under its ``name`` (a taken name needs ``replace=True``).""")


def selected_kinds(scenario: Scenario) -> list[TargetKind]:
    """The kinds ``attack.targets`` lists, in registration order."""
    return [kind for name, kind in TARGETS.items() if name in scenario.attack.targets]


def model_methods(scenario: Scenario) -> tuple[str, ...]:
    """The methods that attack a released model (FedMIA needs the server's view)."""
    return tuple(m for m in scenario.attack.methods if not server_view(m))


def single_model_methods(scenario: Scenario) -> tuple[str, ...]:
    """The methods that need nothing but the target (no reference models)."""
    return tuple(m for m in scenario.attack.methods if not needs_references(m))


def selected_rounds(rounds: list[int], policy: str | tuple[int, ...]) -> list[int]:
    """The rounds ``attack.rounds`` selects among ``rounds``: ``last``, ``all`` or a list."""
    if policy == "last":
        return rounds[-1:]
    if policy == "all":
        return rounds
    return [r for r in rounds if r in policy]


def needs_model_method(kind: TargetKind, scenario: Scenario) -> str | None:
    """The check of a kind that runs the attacks on released models."""
    if model_methods(scenario):
        return None
    return (f"attack.targets lists {kind.name!r}, which needs an attack on a released "
            f"model; attack.methods lists only {', '.join(scenario.attack.methods)}")


def uses_references(scenario: Scenario) -> bool:
    """Whether the run trains reference models: a listed kind scores reference attacks and
    a listed method needs them."""
    a = scenario.attack
    return (a.enabled and any(k.references for k in selected_kinds(scenario))
            and any(trains_references(m) for m in a.methods))
