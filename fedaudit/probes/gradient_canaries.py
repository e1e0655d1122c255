"""``dp-gradient-canaries``: the server's view of the DP audit's white-box gradient canaries
(``audit.dp.level = "gradient"``, :mod:`fedaudit.dp_audit.gradient`): each valid update read
at every canary's coordinate, kept per round in ``dp_gradient/round-NNNN.npz`` (``canary,
client, value``) for the DP-audit stage, which asks for this probe."""

from __future__ import annotations

import numpy as np

from fedaudit.dp_audit.gradient import CanaryReader, canaries_for_model
from fedaudit.probes.base import Probe, ProbeRun, RoundRecord, RoundView, register_probe
from fedaudit.rundir.layout import dp_gradient_round_path


@register_probe
class GradientCanaryView(Probe):
    name = "dp-gradient-canaries"
    describe = ("each client's update at the DP audit's gradient canaries (the DP audit "
                "asks for it at the gradient level)")

    def __init__(self, run: ProbeRun) -> None:
        super().__init__(run)
        s = run.scenario
        self.read = CanaryReader(*canaries_for_model(s.audit.dp.canaries, run.model,
                                                     s.federation.num_clients, s.seed))

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        if not view.replies:
            return
        names = self.read.layout.names
        rows = [(r.client, *self.read(r.client, {k: r.update(k) for k in names}))
                for r in view.replies]
        record.save_arrays(
            dp_gradient_round_path(record.run_dir, record.round),
            canary=np.concatenate([ids for _, ids, _ in rows]).astype(np.int64),
            client=np.concatenate([np.full(len(ids), c) for c, ids, _ in rows]).astype(np.int64),
            value=np.concatenate([v for _, _, v in rows]).astype(np.float64))
