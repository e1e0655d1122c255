"""``dp-server`` / ``dp-client``: Flower's fixed-clipping central DP wrappers (update
clipping on the server or on the clients, uniform mean, Gaussian noise); client-level
accounting over the releases."""

from __future__ import annotations

import math

from fedaudit.aggregators import AGGREGATORS, aggregator_of
from fedaudit.defenses.base import Defense, register_defense
from fedaudit.defenses.options import GAUSSIAN
from fedaudit.defenses.accounting import gaussian_epsilon, json_epsilon


class _CentralDP(Defense):
    options = GAUSSIAN
    uniform_weights = True
    accounted = True
    dp_audit = "client"
    where: str

    def check(self, scenario):
        strategy = aggregator_of(scenario)
        if self.noise_multiplier(scenario.defense) > 0 and not strategy.weighted_mean:
            means = " or ".join(repr(a.name) for a in AGGREGATORS.values() if a.weighted_mean)
            return (f"defense.kind = {self.kind!r} with noise needs federation.strategy = "
                    f"{means} (got {strategy.name!r}): the Gaussian noise is calibrated to, "
                    "and the privacy accounting holds for, the uniform mean of clipped updates")
        return None

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        sigma, delta = self.noise_multiplier(cfg), float(cfg.options["delta"])
        releases = sum(1 for r in rounds if r.get("aggregated"))
        eps = gaussian_epsilon(sigma, releases, delta)
        notes = []
        if math.isinf(eps):
            notes.append("noise_multiplier = 0: update clipping only, no noise, so no "
                         "finite epsilon (inf)")
        notes.append(self.gnq_note)
        return {
            "epsilon": json_epsilon(eps), "releases": releases,
            "num_sampled_clients": num_sampled,
            "accounting": (
                "client-level (epsilon, delta)-DP of the released global models (add/remove "
                f"one client), {self.where}-side fixed clipping of updates to "
                f"{cfg.options['clip_norm']:g}, uniform mean of the sampled clients + Gaussian noise "
                f"std = {sigma:g} * clip / sampled clients, composed over {releases} releases "
                "(rounds with an aggregate) with Opacus' RDP accountant, no amplification by "
                "client sampling"),
            "notes": notes,
        }


@register_defense
class ServerSideDP(_CentralDP):
    kind = "dp-server"
    wrapper = "server-fixed-clipping"
    where = "server"
    server_sees = "each client's local model as sent, BEFORE the server clips (and noises) it"
    needs_each_update = True
    gnq_note = ("server-side update GNQ and update_norm in rounds.jsonl are computed on the "
                "updates as received, i.e. BEFORE the server clips them")


@register_defense
class ClientSideDP(_CentralDP):
    kind = "dp-client"
    wrapper = "client-fixed-clipping"
    where = "client"
    server_sees = ("each client's local model after its own update clipping (noise is added "
                   "later, to the aggregate)")
    gnq_note = "server-side update GNQ and update_norm see the client-clipped updates"
