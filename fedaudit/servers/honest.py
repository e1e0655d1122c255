"""The honest-but-curious server: it follows the protocol -- sends the scenario's model,
aggregates what it receives -- and attacks what reaches it (each update, or only the
aggregate under secure aggregation: :mod:`fedaudit.probes.aggregation`)."""

from __future__ import annotations

from fedaudit.servers.base import HONEST, Server, register_server

__all__ = ["HonestButCurious"]


@register_server
class HonestButCurious(Server):
    kind = HONEST
    #: what the server knew and used in the attacks on updates (results.json
    #: ``label_leakage.threat_model`` and ``reconstruction.threat_model``)
    threat_model = {
        "position": "honest-but-curious server",
        "knows": ["each selected client's update as received", "the global model it started "
                  "from", "the architecture and the loss", "[train]: lr, momentum, weight "
                  "decay, local epochs, batch size", "the client's reported num_examples"],
        "does_not_know": ["the client's samples", "their labels (unless labels = 'given')",
                          "the order of its batches"],
    }

    def active(self, scenario):
        return True
