"""Defenses: one class per ``[defense] kind``, registered in :data:`DEFENSES`.

A :class:`~fedaudit.defenses.base.Defense` declares everything its kind changes: how the
clients train under it (:meth:`~fedaudit.defenses.base.Defense.local_dp`), whether FedAvg
weighs clients uniformly, which Flower wrapper goes around the strategy (by name; the
wrappers themselves live in :mod:`strategies.defenses`, the only Flower code), what the
scenario must satisfy, and its privacy accounting for results.json.  No other module
branches on the kind.  The built-in kinds: ``none``, ``dp-sgd``, ``dp-server``,
``dp-client``, ``clip``, ``sparsify`` (docs/algorithms.md section 6), one module each in this
folder: a new kind is a new file (or a class registered anywhere, e.g. a notebook cell).
A defense that changes the update before it leaves the client overrides
:meth:`~fedaudit.defenses.base.Defense.client_update`.
"""

from __future__ import annotations

from fedaudit.defenses.base import DEFENSES, Defense, get_defense, register_defense
from fedaudit.defenses.summary import defense_summary
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__, first=("none", "dpsgd", "central", "clip"))
DEFENSES.mark_builtin()

__all__ = ["DEFENSES", "Defense", "defense_summary", "get_defense", "register_defense"]
