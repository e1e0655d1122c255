"""``clip``: server-side update clipping without noise (no DP guarantee)."""

from __future__ import annotations

from fedaudit.defenses.base import Defense, register_defense


@register_defense
class UpdateClipping(Defense):
    kind = "clip"
    uniform_weights = True
    wrapper = "server-fixed-clipping"

    def noise_multiplier(self, cfg: dict) -> float:
        return 0.0

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        return {"epsilon": "inf",
                "accounting": ("server-side update clipping to clip_norm (Flower's "
                               "DifferentialPrivacyServerSideFixedClipping with noise 0), "
                               "uniform client weights; no noise, so no DP guarantee"),
                "notes": ["clipping alone gives no finite epsilon (inf)",
                          "server-side update GNQ and update_norm in rounds.jsonl are "
                          "computed on the updates as received, i.e. BEFORE the server "
                          "clips them"]}
