"""``update-gnq``: how much each client's update stands out from the round's others --
server-side GNQ with the round's updates u_c = w_c - w_global as the rows of G, K = U U^T
(batch space; flattening is exact for whole update vectors; docs/algorithms.md section 1).
rounds.jsonl ``gnq_update``, by partition id; rounds with fewer than two valid replies
score none."""

from __future__ import annotations

import numpy as np

from fedaudit.probes.base import Probe, RoundRecord, RoundView, register_probe


@register_probe
class UpdateGnq(Probe):
    name = "update-gnq"
    describe = "server-side GNQ of each client's update"
    key = "audit.gnq.server = true"
    every_trajectory = True

    @classmethod
    def enabled(cls, scenario):
        return scenario.audit.gnq.server

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        scores = {}
        if len(view.replies) >= 2:
            from fedaudit.gnq import gnq_of_updates

            cfg = self.run.scenario.audit.gnq
            values = gnq_of_updates(np.stack([r.flat_update for r in view.replies]),
                                    lam=cfg.lam, lam_mode=cfg.lam_mode, rho=cfg.rho)
            scores = {str(r.client): float(s) for r, s in
                      zip(view.replies, np.asarray(values, dtype=np.float64))}
        record.entry("gnq_update", scores)
