"""Which server-side probes a run needs (:mod:`fedaudit.probes`), and whether the scenario's
aggregation (:mod:`fedaudit.probes.aggregation`) shows the server what they read.

A probe runs when its own scenario keys turn it on (``Probe.enabled``) or when a listed
attack target kind (``TargetKind.probes``, with ``attack.enabled``) or an enabled audit
stage (``Stage.probes``) asks for it by name.
"""

from __future__ import annotations

from fedaudit.aggregators import aggregator_of
from fedaudit.audit.stages import ordered_stages
from fedaudit.audit.targets import selected_kinds
from fedaudit.probes import PROBES, UPDATES, VIEWS, Probe
from fedaudit.probes.aggregation import AGGREGATIONS, Aggregation, aggregation_of
from fedaudit.scenario import Scenario

__all__ = ["check_server_view", "probe_requests", "run_probes"]


def probe_requests(scenario: Scenario) -> dict[str, list[str]]:
    """probe name -> who asks for it (its own key, ``attack.targets lists 'clients'``,
    ``audit stage 'dp-audit'``), for every probe the run needs, in registration order."""
    asks: dict[str, list[str]] = {}
    for name, cls in PROBES.items():
        if cls.enabled(scenario):
            asks.setdefault(name, []).append(cls.key or f"probe {name!r}")
    if scenario.attack.enabled:
        for kind in selected_kinds(scenario):
            for name in kind.probes(scenario):
                asks.setdefault(name, []).append(f"attack.targets listing {kind.name!r}")
    for stage in ordered_stages():
        if stage.enabled(scenario):
            for name in stage.probes(scenario):
                asks.setdefault(name, []).append(f"the {stage.name!r} audit stage")
    unknown = [n for n in asks if n not in PROBES]
    if unknown:
        raise LookupError(f"{asks[unknown[0]][0]} asks for probe {unknown[0]!r}, which is not "
                          f"registered; registered: {PROBES.allowed()}")
    return {name: asks[name] for name in PROBES if name in asks}


def run_probes(scenario: Scenario, *, released: bool = True) -> list[type[Probe]]:
    """The probe classes a training run of ``scenario`` needs, in registration order;
    ``released`` False: an extra training seed's run (``audit.quantization.seeds``), which
    runs only the probes with ``every_trajectory``."""
    return [PROBES[name] for name in probe_requests(scenario)
            if released or PROBES[name].every_trajectory]


def _shown(agg: Aggregation) -> str:
    return " and ".join(VIEWS[v] for v in VIEWS if v in agg.shows) or "nothing"


def check_server_view(scenario: Scenario) -> str | None:
    """What the run's aggregator and probes need of the scenario (one line), first of all
    a view of the round that the scenario's aggregation hides from the server (a robust
    ``federation.strategy`` reads each update; so do some probes): the message names who
    needs it and the aggregations that would show it; None when all fit."""
    agg = aggregation_of(scenario)
    rule = aggregator_of(scenario)
    if rule.needs_each_update and agg.hides(frozenset({UPDATES})):
        fits = [a.name for a in AGGREGATIONS.values() if not a.hides(frozenset({UPDATES}))]
        return (f"federation.strategy = {rule.name!r} needs {VIEWS[UPDATES]}, "
                f"but federation.aggregation = {agg.name!r} shows the server only "
                f"{_shown(agg)}; aggregations that show it: {', '.join(fits) or 'none'}")
    if agg.check is not None and (problem := agg.check(scenario)):
        return problem
    for name, why in probe_requests(scenario).items():
        cls = PROBES[name]
        hidden = agg.hides(cls.reads)
        if hidden:
            fits = [a.name for a in AGGREGATIONS.values() if not a.hides(cls.reads)]
            return (f"{why[0]} needs {VIEWS[hidden[0]]} (probe {name!r}), but "
                    f"federation.aggregation = {agg.name!r} shows the server only {_shown(agg)}; "
                    f"aggregations that show it: {', '.join(fits) or 'none'}")
        if problem := cls.check(scenario):
            return problem
    return None
