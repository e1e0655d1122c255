"""``client-models``: each client's model as the server received it (before the wrapped
strategy clips or noises anything) -- the curious server's view, attacked by the ``clients``
target kind (:mod:`fedaudit.audit.targets.client_models`), which asks for this probe.  Kept
under ``client_models/round-NNNN/client-CCCC.pt`` for the rounds ``attack.rounds`` can ask
for: a listed round, every round (``all``), or each client's latest (``last``: a round's
folder goes as soon as each of its clients has trained again)."""

from __future__ import annotations

import torch

from fedaudit.probes.base import Probe, RoundRecord, RoundView, register_probe
from fedaudit.rundir.client_models import drop_superseded_rounds
from fedaudit.rundir.layout import client_model_path


@register_probe
class ClientModels(Probe):
    name = "client-models"
    describe = "each client's model as received (the clients attack target asks for it)"

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        policy = self.run.scenario.attack.rounds
        if not view.replies or (not isinstance(policy, str) and record.round not in policy):
            return
        for r in view.replies:
            record.save_state(client_model_path(record.run_dir, record.round, r.client),
                              {k: torch.from_numpy(v) for k, v in r.model.items()})
        if policy == "last":
            drop_superseded_rounds(record.run_dir, record.round)
