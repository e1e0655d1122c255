"""``federation.aggregation = "secagg+"``: Flower's SecAgg+ (Bell et al. 2020, "Secure
Single-Server Aggregation with (Poly)Logarithmic Overhead", CCS), run by Flower itself
(``SecAggPlusWorkflow`` on the server, ``secaggplus_mod`` on the clients:
:mod:`strategies.secure_aggregation`).  Each sampled client quantises its weighted model
(parameters clipped to ``[-clipping_range, clipping_range]``, ``quantization_range``
levels, weight num_examples / ``max_weight``), adds pairwise masks that cancel in the
sum and a private mask whose seed is secret-shared among ``num_shares`` neighbours; the
server learns only the sum, from which it takes the weighted mean (FedAvg).

So the server sees only the aggregate: every probe, attack target and stage that reads a
client's update or its records is refused by validation
(:func:`fedaudit.audit.probing.check_server_view`), and so are the settings that need
each update on the server (:func:`check_secagg`; registered with the path in
:mod:`fedaudit.probes.aggregation`)."""

from __future__ import annotations

from fedaudit.aggregators import AGGREGATORS, aggregator_of
from fedaudit.scenario import Scenario

__all__ = ["NAME", "check_secagg", "check_secagg_weights"]

NAME = "secagg+"


def check_secagg(scenario: Scenario) -> str | None:
    """One line on what SecAgg+ cannot run with, before training (Flower's own checks
    come later, and an even share count fails inside its client mod)."""
    from fedaudit.defenses import DEFENSES, get_defense
    from fedaudit.dp_audit.levels import planted_level

    fed, sa = scenario.federation, scenario.federation.secagg
    _, per_round = fed.sampled_clients()
    head = f"federation.aggregation = {NAME!r}"
    strategy = aggregator_of(scenario)
    if not strategy.weighted_mean:
        means = [a.name for a in AGGREGATORS.values() if a.weighted_mean]
        return (f"{head} hands the server the weighted mean of the clients' models, which "
                f"federation.strategy = {strategy.name!r} does not take as the new model "
                f"({strategy.describe}); allowed: {', '.join(means)}")
    if per_round < 3:
        return (f"{head} needs at least 3 clients per round (num_shares >= 3); this "
                f"scenario samples {per_round} (federation.num_clients, fraction_train)")
    if sa.num_shares % 2 == 0 or sa.num_shares > per_round:
        odd = ", ".join(str(k) for k in range(3, per_round + 1, 2))
        return (f"federation.secagg.num_shares = {sa.num_shares}: SecAgg+ needs an odd "
                f"number of shares, at most the {per_round} clients per round; allowed: {odd}")
    if sa.reconstruction_threshold >= sa.num_shares:
        return (f"federation.secagg.reconstruction_threshold = {sa.reconstruction_threshold}: "
                f"must be below num_shares = {sa.num_shares}; allowed: 2..{sa.num_shares - 1}")
    m, q = sa.modulus_range, sa.quantization_range
    if m & (m - 1) or m <= q or m > 2 ** 32:
        return (f"federation.secagg.modulus_range = {m}: must be a power of 2 above "
                f"quantization_range = {q} and at most 2^32 = {2 ** 32}")
    defense = get_defense(scenario.defense.kind)
    if defense.needs_each_update:
        fits = [k for k in DEFENSES.names() if not get_defense(k).needs_each_update]
        return (f"defense.kind = {scenario.defense.kind!r} clips each update on the server, "
                f"which {head} hides from it; allowed with {NAME}: {', '.join(fits)}")
    level = planted_level(scenario.audit.dp)
    if level is not None and level.plants_clients:
        return (f"audit.dp.level = {scenario.audit.dp.level!r} adds canary clients on the "
                f"server, outside {head}; use the sample-level audit or plain aggregation")
    if scenario.faults.nan_rate > 0:
        return (f"faults.nan_rate = {scenario.faults.nan_rate:g}: under {head} the server "
                "cannot reject a non-finite model (it sees only the masked sum); set it to 0")
    return None



def check_secagg_weights(scenario: Scenario, data) -> str | None:
    """SecAgg+ encodes a client's weight (its num_examples) as a share of ``max_weight``;
    a larger one overflows its arithmetic (Flower only warns)."""
    largest = max(len(ids) for ids in data.clients)
    cap = scenario.federation.secagg.max_weight
    if largest > cap:
        return (f"federation.secagg.max_weight = {cap:g}: a client holds {largest} training "
                f"samples, its SecAgg+ weight; allowed: >= {largest}")
    return None
