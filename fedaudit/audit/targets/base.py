"""Attack targets: what an attacker queries, as one type (:class:`Target`) and a registry
of the kinds a scenario can list in ``attack.targets`` (:data:`TARGETS`).

A :class:`TargetKind` knows which models of a run it stands for (:meth:`~TargetKind.targets`:
the final global model, each quantized release, the global model after each selected
round, each client's model as the server received it), which attacks run on them, and
where their results go in results.json (:meth:`~TargetKind.record`, the paths it declares
in :attr:`~TargetKind.writes`).  The attack loop
(:func:`fedaudit.audit.attack_loop.attack`) treats every target alike: a target is one
column of the samples x models score matrix.  A new kind is one class with
``@register_target``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np
import torch

from attacks.membership.reference_signals import ReferenceSignals
from attacks.membership.registry import needs_references, server_view, trains_references
from fedaudit.audit.writes import check_declared
from fedaudit.registry import Registry, instance_registrar
from fedaudit.scenario import Scenario

__all__ = ["TARGETS", "Target", "TargetKind", "model_methods",
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
    #: the results.json paths :meth:`record` adds or changes (the path syntax of
    #: :attr:`fedaudit.audit.stages.base.Stage.writes`); the attacks stage checks them
    writes: ClassVar[tuple[str, ...]] = ()

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

    def record(self, ctx: Any, results: list[Any]) -> list[Any]:
        """Write the kind's results.json entries (exactly the paths of :attr:`writes`) from
        its targets' results (:class:`~fedaudit.audit.products.TargetResult`), leaving any typed
        product later stages read in ``ctx``; return the score rows to store, in
        scores.npz order (default: every row, target order)."""
        return [row for r in results for row in r.rows]


def _check(name: str, kind: Any, meta: dict) -> None:
    if not isinstance(kind, TargetKind):
        raise TypeError(f"target kind {name!r} must be a TargetKind instance")
    check_declared(f"target kind {name!r}", kind.writes)


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
