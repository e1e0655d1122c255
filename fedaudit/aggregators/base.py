"""The :class:`Aggregator` interface and its registry: how the server combines the replies
of a round into the next global model (``federation.strategy``).

An aggregator names the Flower strategy that does the work (``flwr.serverapp.strategy``,
built in :mod:`fedaudit.simulation.strategy_factory`, the only Flower code), declares the
options of that strategy the scenario may set (``[federation.<name>]``) and what the rule
needs: each client's update (the robust rules: medians, trimmed means, Krum's distances),
server state between rounds (the server optimizers), or only the weighted mean of the
replies (FedAvg).  Validation reads these declarations; no module branches on a strategy's
name.

Orthogonal to it is ``federation.aggregation`` (:mod:`fedaudit.probes.aggregation`): how
the replies reach the server, each one (``plain``) or only their masked sum (``secagg+``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from fedaudit.options import Field, check_options
from fedaudit.registry import Registry, instance_registrar
from fedaudit.scenario import FederationConfig, Scenario

__all__ = ["AGGREGATORS", "Aggregator", "aggregator_of", "get_aggregator", "options_of",
           "register_aggregator"]

def _check(name: str, agg: Any, meta: dict) -> None:
    """An Aggregator instance whose options are Fields, under a name that is no key of
    ``[federation]`` (its table ``[federation.<name>]`` would shadow ``[federation.secagg]``
    and the other sub-tables)."""
    if not isinstance(agg, Aggregator):
        raise TypeError(f"aggregator {name!r} must be an Aggregator instance")
    taken = [f.name for f in dataclasses.fields(FederationConfig)]
    if name in taken:
        raise ValueError(f"aggregator {name!r}: [federation.{name}] is taken; a name other "
                         f"than {', '.join(taken)}")
    check_options(f"aggregator {name!r}", agg.options)


#: name -> an :class:`Aggregator` instance (the scenario's ``federation.strategy`` choices)
AGGREGATORS: Registry[str, "Aggregator"] = Registry(
    "aggregator", name_pattern=r"[A-Za-z][A-Za-z0-9_-]*", check=_check)

register_aggregator = instance_registrar(
    AGGREGATORS, "name", """Class decorator: register an instance of ``cls`` under
    ``cls.name`` (a name that other code registered needs ``replace=True``).""")


def get_aggregator(name: str) -> "Aggregator":
    return AGGREGATORS.get(name)


def aggregator_of(scenario: Scenario) -> "Aggregator":
    """The scenario's aggregator (``federation.strategy``)."""
    return AGGREGATORS.get(scenario.federation.strategy)


class Aggregator:
    """One aggregation rule.  ``options`` are the values of ``[federation.<name>]``."""

    #: the scenario's name for it (``federation.strategy``): Flower's class name
    name: ClassVar[str]
    #: the ``flwr.serverapp.strategy`` class that aggregates (default: ``name``)
    flower: ClassVar[str | None] = None
    #: one line on the rule and its paper
    describe: ClassVar[str] = ""
    #: keyword arguments of the Flower class the scenario may set (name -> Field), passed
    #: to it as they are; each is ``[federation.<name>] key``
    options: ClassVar[Mapping[str, Field]] = {}
    #: the rule reads each client's update (order statistics, distances between updates):
    #: impossible when the server sees only their sum (secure aggregation)
    needs_each_update: ClassVar[bool] = False
    #: the new global model is the weighted mean of the replies, nothing else (what the
    #: central DP wrappers' noise calibration and accounting assume)
    weighted_mean: ClassVar[bool] = False
    #: the server keeps optimizer state between rounds (momentum, second moments) that the
    #: run directory does not checkpoint, so such a run cannot be resumed
    server_state: ClassVar[bool] = False

    @property
    def flower_class(self) -> str:
        return self.flower or self.name

    def check(self, scenario: Scenario, options: Mapping[str, Any]) -> str | None:
        """One line (naming the key and what is allowed) when the scenario cannot run
        with this rule, or None."""
        return None


def options_of(scenario: Scenario) -> Mapping[str, Any]:
    """The values of ``[federation.<strategy>]`` (the declared defaults where the scenario
    was built without them)."""
    agg = aggregator_of(scenario)
    given = scenario.federation.options.get(agg.name, {})
    return {k: given.get(k, f.default) for k, f in agg.options.items()}
