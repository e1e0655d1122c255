"""The scenario's Flower strategy (its registered aggregator, :mod:`fedaudit.aggregators`),
wrapped in its defense."""

from __future__ import annotations

import flwr.serverapp.strategy as flwr_strategies
from flwr.app import MetricRecord

from strategies import wire
from fedaudit.aggregators import aggregator_of, options_of
from fedaudit.defenses import get_defense
from fedaudit.scenario import Scenario
from fedaudit.dp_audit.canaries import client_inclusion
from fedaudit.dp_audit.levels import planted_level
from strategies.canary_clients import CanaryClientsStrategy, with_canary_slots
from strategies.defenses import wrap_defense


def _train_metrics(records: list, weighted_by_key: str):
    """Weighted mean of the reply metrics except ``partition-id`` (an id, not a metric)
    and the defense's unit weight."""
    from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

    agg = aggregate_metricrecords(records, weighted_by_key)
    return MetricRecord({k: v for k, v in agg.items()
                         if k not in (wire.PARTITION_ID, wire.UNIT_WEIGHT)})


def make_strategy(scenario: Scenario, seed: int | None = None, *, canary_clients: bool = True):
    """The scenario's Flower strategy (the class its aggregator names, with the options of
    ``[federation.<strategy>]``), federated evaluation off: the auditing wrapper evaluates
    the global model centrally on ``test``.

    With ``defense.kind`` = dp-server / dp-client / clip the strategy comes wrapped in
    Flower's fixed-clipping DP wrapper (:func:`strategies.defenses.wrap_defense`; noise
    seeded from ``seed``, default the scenario seed) and aggregates with uniform client
    weights (the ``dp-weight`` metric every client then sends as 1): the noise std
    noise_multiplier * clip_norm / m is calibrated to the uniform mean of m clipped updates.
    With a client-level ``[audit.dp]`` the wrapper is wrapped once more in
    :class:`strategies.canary_clients.CanaryClientsStrategy` (m counts the canaries),
    unless ``canary_clients`` is false (the auditor's reference federations).
    """
    fed = scenario.federation
    defense = scenario.defense
    aggregator = aggregator_of(scenario)
    cls = getattr(flwr_strategies, aggregator.flower_class)
    n = fed.num_clients
    min_train, sampled = fed.sampled_clients()
    weighted = (wire.UNIT_WEIGHT if get_defense(defense.kind).uniform_weights
                else wire.NUM_EXAMPLES)
    audit = scenario.audit.dp
    level = planted_level(audit)
    canaries = canary_clients and level is not None and level.plants_clients
    included = client_inclusion(audit.canaries, scenario.seed) if canaries else None
    k = int(included.sum()) if canaries else 0
    if k:  # the DP wrapper counts the canary clients among the sampled ones
        cls = with_canary_slots(cls, k)
    base = cls(fraction_train=fed.fraction_train, fraction_evaluate=0.0,
               min_train_nodes=min_train, min_evaluate_nodes=0, min_available_nodes=n,
               weighted_by_key=weighted, train_metrics_aggr_fn=_train_metrics,
               **options_of(scenario))
    wrapped = wrap_defense(base, defense, num_clients=n + k, num_sampled=sampled + k,
                           seed=scenario.seed if seed is None else seed)
    if not canaries:
        return wrapped
    # client-level DP audit: the included canary clients join every round's replies
    return CanaryClientsStrategy(wrapped, included=included,
                                 clip_norm=float(defense.options["clip_norm"]),
                                 seed=scenario.seed)
