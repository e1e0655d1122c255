"""``none``: no defense."""

from __future__ import annotations

from fedaudit.defenses.base import Defense, register_defense


@register_defense
class NoDefense(Defense):
    kind = "none"
    dp_audit = "sample"

    def parameters(self, cfg):
        return {"noise_multiplier": None, "clip_norm": None, "delta": None}

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        return {"epsilon": None, "accounting": "no defense: nothing accounted"}
