"""``clip``: server-side update clipping without noise (no DP guarantee)."""

from __future__ import annotations

from fedaudit.defenses.base import Defense, register_defense
from fedaudit.defenses.options import CLIP_NORM


@register_defense
class UpdateClipping(Defense):
    kind = "clip"
    options = {"clip_norm": CLIP_NORM}
    uniform_weights = True
    dp_audit = "client"
    wrapper = "server-fixed-clipping"
    server_sees = "each client's local model as sent, BEFORE the server clips it"
    needs_each_update = True

    def noise_multiplier(self, cfg):
        return 0.0

    def parameters(self, cfg):
        return {"noise_multiplier": 0.0, "clip_norm": float(cfg.options["clip_norm"]),
                "delta": None}

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        return {"epsilon": "inf",
                "accounting": ("server-side update clipping to clip_norm (Flower's "
                               "DifferentialPrivacyServerSideFixedClipping with noise 0), "
                               "uniform client weights; no noise, so no DP guarantee"),
                "notes": ["clipping alone gives no finite epsilon (inf)",
                          "server-side update GNQ and update_norm in rounds.jsonl are "
                          "computed on the updates as received, i.e. BEFORE the server "
                          "clips them"]}
