"""What the server sees of a round, by aggregation path (``federation.aggregation``): a
capability, not prose.  Each registered :class:`Aggregation` declares which of the round's
views (:data:`fedaudit.probes.VIEWS`) reach the server: with plain aggregation (Flower's
strategies) every client's reply does; secure aggregation shows the server only the
aggregate.  Validation refuses, with one line naming them, the probes, attack target kinds
and audit stages that need a view the scenario's aggregation hides
(:func:`fedaudit.audit.probing.check_server_view`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fedaudit.probes.base import AGGREGATE, RECORDS, UPDATES, VIEWS
from fedaudit.probes.secure_aggregation import NAME as SECAGG, check_secagg, check_secagg_weights
from fedaudit.registry import Registry
from fedaudit.scenario import Scenario

__all__ = ["AGGREGATIONS", "Aggregation", "aggregation_of", "register_aggregation"]


@dataclass(frozen=True)
class Aggregation:
    """One aggregation path: its name, one line on what the server receives, the views
    of a round it shows the server (a subset of :data:`fedaudit.probes.VIEWS`), its own
    check of a scenario and of the scenario's built data before training (each one line
    naming the key, or None)."""

    name: str
    describe: str
    shows: frozenset[str]
    check: Callable[[Scenario], str | None] | None = None
    check_data: Callable[[Scenario, Any], str | None] | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.shows) - set(VIEWS))
        if unknown:
            raise ValueError(f"aggregation {self.name!r}: shows {unknown!r}; allowed: "
                             + ", ".join(VIEWS))

    def hides(self, views: frozenset[str]) -> list[str]:
        """Which of ``views`` the server does not get, in :data:`VIEWS` order."""
        return [v for v in VIEWS if v in views and v not in self.shows]


#: name -> aggregation path (``federation.aggregation``)
AGGREGATIONS: Registry[str, Aggregation] = Registry("aggregation",
                                                    name_pattern=r"[a-z][a-z0-9+_-]*")


def register_aggregation(aggregation: Aggregation, *, replace: bool = False) -> Aggregation:
    """Register ``aggregation`` under its name (a taken name needs ``replace=True``)."""
    return AGGREGATIONS.register(aggregation.name, aggregation, replace=replace)


def aggregation_of(scenario: Scenario) -> Aggregation:
    """The scenario's aggregation path (``federation.aggregation``)."""
    return AGGREGATIONS.get(scenario.federation.aggregation)


register_aggregation(Aggregation(
    "plain", "every client's reply reaches the server, which aggregates it (Flower's "
    "strategies)", frozenset({UPDATES, RECORDS, AGGREGATE})))
register_aggregation(Aggregation(
    SECAGG, "Flower's SecAgg+: the server receives only the sum of the sampled clients' "
    "masked, quantised, weighted models, and takes their weighted mean",
    frozenset({AGGREGATE}), check=check_secagg, check_data=check_secagg_weights))

AGGREGATIONS.mark_builtin()
