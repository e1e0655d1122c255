"""``update-norm``: the L2 norm of each client's update u_c = w_c - w_global as the server
received it (rounds.jsonl ``update_norm``, by partition id)."""

from __future__ import annotations

import numpy as np

from fedaudit.probes.aggregation import aggregation_of
from fedaudit.probes.base import UPDATES, Probe, RoundRecord, RoundView, register_probe


@register_probe
class UpdateNorm(Probe):
    name = "update-norm"
    describe = "each client's update norm (whenever the server sees the updates)"
    every_trajectory = True

    @classmethod
    def enabled(cls, scenario):
        return UPDATES in aggregation_of(scenario).shows

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        record.entry("update_norm", {str(r.client): float(np.linalg.norm(r.flat_update))
                                     for r in view.replies})
