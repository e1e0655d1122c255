"""``dp-sgd``: every client trains with DP-SGD (Opacus); sample-level accounting."""

from __future__ import annotations

import math
from typing import Iterable

from fedaudit.defenses.base import Defense, register_defense
from fedaudit.defenses.options import GAUSSIAN
from fedaudit.defenses.accounting import dpsgd_epsilon, json_epsilon


def per_client_steps(rounds: Iterable[dict],
                     num_clients: int) -> tuple[list[int], list[float | None]]:
    """Total DP-SGD steps and the (constant) Poisson rate of each client, from the
    ``dp_steps`` / ``dp_sample_rate`` of the rounds.jsonl records."""
    steps = [0] * num_clients
    rates: list[float | None] = [None] * num_clients
    for rec in rounds:
        for pid, s in (rec.get("dp_steps") or {}).items():
            c = int(pid)
            steps[c] += int(s)
            q = float(rec["dp_sample_rate"][pid])
            if rates[c] is not None and abs(rates[c] - q) > 1e-12:
                raise ValueError(f"client {c}: DP-SGD sample rate changed between rounds "
                                 f"({rates[c]} -> {q}); the accounting assumes one rate")
            rates[c] = q
    return steps, rates


@register_defense
class DPSGD(Defense):
    kind = "dp-sgd"
    dp_audit = "sample"
    options = GAUSSIAN
    accounted = True
    server_sees = "each client's DP-SGD-trained local model, as sent"

    def local_dp(self, cfg):
        return cfg.options

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        sigma, delta = self.noise_multiplier(cfg), float(cfg.options["delta"])
        steps, rates = per_client_steps(rounds, num_clients)
        per = [None if rates[c] is None else dpsgd_epsilon(sigma, rates[c], steps[c], delta)
               for c in range(num_clients)]
        finite = [e for e in per if e is not None]
        eps = max(finite) if finite else None
        notes = []
        if eps is not None and math.isinf(eps):
            notes.append("noise_multiplier = 0: per-sample clipping only, no noise, so no "
                         "finite epsilon (inf)")
        notes.append("server-side update GNQ sees the noised DP-SGD updates; client-side "
                     "GNQ is computed on the clipped per-sample gradients")
        return {
            "epsilon": json_epsilon(eps),
            "epsilon_per_client": [json_epsilon(e) for e in per],
            "steps_per_client": steps,
            "sample_rate_per_client": rates,
            "accounting": (
                "sample-level (epsilon, delta)-DP of each client's local data (add/remove one "
                "sample), Opacus RDP accountant over all local DP-SGD steps of all rounds the "
                f"client trained in, Poisson sampling at q = 1/ceil(n_client/batch_size), "
                f"noise multiplier {sigma:g}, per-sample clip {cfg.options['clip_norm']:g}; epsilon = "
                "the largest client's"),
            "notes": notes,
        }
