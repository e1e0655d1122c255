"""The :class:`Server` interface, its registry, and the model a run's server sends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from torch import nn

from fedaudit.models.registry import model_for
from fedaudit.options import Field, check_options
from fedaudit.registry import Registry, instance_registrar
from fedaudit.scenario import Scenario

if TYPE_CHECKING:
    from fedaudit.data import FederatedData

__all__ = ["HONEST", "SERVERS", "Server", "register_server", "served_model", "server_of"]

#: the kind of server a scenario has unless a malicious kind is switched on
HONEST = "honest-but-curious"


class Server:
    """One kind of server: what it sends the clients and what it knows."""

    #: the registry key
    kind: ClassVar[str]
    #: whether the server departs from the protocol (modifies the model it sends)
    malicious: ClassVar[bool] = False
    #: scenario tables the kind declares, like an audit stage's: ``{"table": {key: Field}}``
    options: ClassVar[Mapping[str, Mapping[str, Field]]] = {}
    #: what the server knew and did (results.json ``threat_model`` of its attacks):
    #: ``position``, ``knows``, ``does_not_know`` and, for a malicious one, ``does``
    threat_model: ClassVar[Mapping[str, Any]] = {}
    #: the results.json sections its own attacks write (``fedaudit matrix`` takes them from
    #: the server's run into the defense's matrix)
    sections: ClassVar[tuple[str, ...]] = ()

    def active(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` has this kind of server (a malicious kind's own switch)."""
        return False

    def serve(self, model: nn.Module, scenario: Scenario, data: "FederatedData") -> nn.Module:
        """The model the server sends, built around the scenario's task ``model`` from data
        the server holds itself; by default the task model as it is."""
        return model

    def modify(self, round_: int, state: dict[str, Any], scenario: Scenario,
               data: "FederatedData") -> dict[str, Any] | None:
        """The parameters the server sends the clients at ``round_`` instead of the global
        model ``state`` (a torch state dict), or None to send ``state`` as it is (the
        default: an honest server, or a malicious one outside its round)."""
        return None

    def modifies_rounds(self) -> bool:
        """Whether the kind overrides :meth:`modify` (the strategy asks it each round)."""
        return type(self).modify is not Server.modify


def _check(kind: str, server: Any, meta: dict) -> None:
    if not isinstance(server, Server):
        raise TypeError(f"server {kind!r} must be a Server instance")
    for table, fields in server.options.items():
        check_options(f"server {kind!r}, table [{table}]", fields)


#: kind -> a :class:`Server` instance
SERVERS: Registry[str, Server] = Registry("server", name_pattern=r"[a-z][a-z0-9+_-]*",
                                          check=_check)

register_server = instance_registrar(
    SERVERS, "kind", """Class decorator: register an instance of a :class:`Server` subclass
    under its ``kind`` (a taken kind needs ``replace=True``).""")


def server_of(scenario: Scenario) -> Server:
    """The scenario's server: the first registered malicious kind it switches on, else
    the honest-but-curious server."""
    return next((s for s in SERVERS.values() if s.malicious and s.active(scenario)),
                SERVERS.get(HONEST))


def served_model(scenario: Scenario, data: "FederatedData", *, seed: int) -> nn.Module:
    """The model the scenario's server sends: :func:`fedaudit.models.model_for` of
    ``[model]``, initialised from ``seed``, through :meth:`Server.serve`."""
    return server_of(scenario).serve(model_for(scenario.model, data, seed=seed), scenario, data)
