"""Plug-ins registered in the driver process, carried to the simulated clients.

The clients run in Ray worker processes, which import fedaudit afresh: a dataset, model or
GNQ kernel that a script or notebook registered (``@register_dataset("mine")``) exists only
in the driver.  :func:`client_app_with_plugins` returns a ClientApp whose first mod
registers those entries in the worker before the client trains or runs an audit job.
The ClientApp travels to the workers pickled (Ray's cloudpickle); the plug-ins' own modules
are pickled by value, so they need not be importable there (a notebook's ``__main__`` is
pickled by value anyway).

Every registry loaded in the driver is carried (:func:`fedaudit.registry.loaded_registries`,
each found again in the worker by its kind after importing the module that defines it),
not a list of them: the workers train (datasets, models, GNQ kernels, augmentations,
defenses, DP audit levels), run the attacks on updates (reconstruction and label attacks)
and validate the scenario they receive, which names entries of every other registry
(attacks, quantizers, target kinds, audit stages, probes, aggregations, aggregators).
Under ``flwr run`` / ``fedaudit deploy`` the ClientApp is loaded by name in other
processes: there plug-ins must be importable modules that register on import.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

from flwr.app import Context, Message

from fedaudit.registry import Registry, loaded_registries, registry_of

#: packages every worker imports itself: their code is never pickled by value (torch's
#: layer types key GNQ kernels, the user's own or fedaudit's)
IMPORTED_PACKAGES = ("fedaudit", "attacks", "strategies", "torch")


@dataclass(frozen=True)
class PluginEntry:
    registry: str  # the registry's kind ("dataset", "GNQ kernel", "label attack" ...)
    module: str  # the module that defines the registry
    key: Any
    obj: Any
    meta: dict


def _registry(entry: PluginEntry) -> Registry:
    """The entry's registry in this process (its module imported first: a fresh worker
    loads only what its own imports needed)."""
    importlib.import_module(entry.module)
    return registry_of(entry.registry)


def _code_of(key: Any, obj: Any) -> list[Any]:
    """The code objects of a registration: the registered object (a QuantizerSpec's
    function) and, for GNQ kernels, the module type it is keyed by."""
    return [getattr(obj, "fn", obj), *([key] if isinstance(key, type) else [])]


def _is_user_code(code: Any) -> bool:
    module = getattr(code, "__module__", None) or ""
    return module.split(".")[0] not in IMPORTED_PACKAGES


def user_plugins() -> list[PluginEntry]:
    """The registrations a fresh worker would not have: everything registered or replaced
    after fedaudit's own modules registered theirs (:meth:`Registry.mark_builtin`), also
    when it reuses fedaudit's code (a built-in GNQ kernel for another torch layer type)."""
    from fedaudit.config.schema import registries

    registries()  # the built-in entries of every registry the schema reads are in
    # a registry that a plug-in defines itself (a new family's attacks) is not looked up
    # by its module in the worker: it travels, pickled by value, inside the plug-in that
    # holds it
    return [PluginEntry(reg.kind, reg.module, e.key, e.obj, dict(e.meta))
            for reg in loaded_registries()
            if reg.module.split(".")[0] in IMPORTED_PACKAGES for e in reg.added()]


class RegisterPlugins:
    """A Flower mod: (re-)register the carried entries in this process, then train."""

    def __init__(self, entries: list[PluginEntry]) -> None:
        self.entries = entries

    def __call__(self, msg: Message, context: Context, call_next) -> Message:
        for e in self.entries:
            _registry(e).register(e.key, e.obj, replace=True, **e.meta)
        return call_next(msg, context)


def client_app_with_plugins(entries: list[PluginEntry]):
    """The simulation's ClientApp (:data:`fedaudit.simulation.client.simulation_client_app`),
    with :class:`RegisterPlugins` first when there is anything to carry."""
    from fedaudit.simulation.client import make_client_app, simulation_client_app

    if not entries:
        return simulation_client_app
    from ray import cloudpickle

    for e in entries:
        for code in _code_of(e.key, e.obj):
            module = sys.modules.get(getattr(code, "__module__", "") or "")
            if module is not None and module.__name__ != "__main__" and _is_user_code(code):
                cloudpickle.register_pickle_by_value(module)
    return make_client_app([RegisterPlugins(entries)], audit_jobs=True)
