"""Plug-ins registered in the driver process, carried to the simulated clients.

The clients run in Ray worker processes, which import fedaudit afresh: a dataset, model or
GNQ kernel that a script or notebook registered (``@register_dataset("mine")``) exists only
in the driver.  :func:`client_app_with_plugins` returns a ClientApp whose first mod
registers those entries in the worker before the client trains.  The ClientApp travels to
the workers pickled (Ray's cloudpickle); the plug-ins' own modules are pickled by value,
so they need not be importable there (a notebook's ``__main__`` is pickled by value anyway).
Attacks, quantizers, target kinds, audit stages, probes and aggregation paths run in the
driver (the server's rounds, the post-training audit); they are carried too, because each
client validates the scenario it receives, names and tables included.
Under ``flwr run`` / ``fedaudit deploy`` the ClientApp is loaded by name in other
processes: there plug-ins must be importable modules that register on import.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from flwr.app import Context, Message

#: packages every worker imports itself: their code is never pickled by value (torch's
#: layer types key GNQ kernels, the user's own or fedaudit's)
IMPORTED_PACKAGES = ("fedaudit", "attacks", "strategies", "torch")


@dataclass(frozen=True)
class PluginEntry:
    registry: str  # "datasets", "models", "kernels"
    key: Any
    obj: Any
    meta: dict


def _client_registries() -> dict[str, Any]:
    """Every registry: the scenario's (:func:`fedaudit.config.schema.registries`, which the
    clients need to validate the scenario they receive) and the GNQ kernels (their
    training)."""
    import dataclasses

    from fedaudit.config.schema import registries
    from fedaudit.gnq.kernels import KERNELS

    regs = registries()
    return {**{f.name: getattr(regs, f.name) for f in dataclasses.fields(regs)},
            "kernels": KERNELS}


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
    return [PluginEntry(name, e.key, e.obj, dict(e.meta))
            for name, reg in _client_registries().items() for e in reg.added()]


class RegisterPlugins:
    """A Flower mod: (re-)register the carried entries in this process, then train."""

    def __init__(self, entries: list[PluginEntry]) -> None:
        self.entries = entries

    def __call__(self, msg: Message, context: Context, call_next) -> Message:
        regs = _client_registries()
        for e in self.entries:
            regs[e.registry].register(e.key, e.obj, replace=True, **e.meta)
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
