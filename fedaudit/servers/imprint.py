"""The malicious server of Fowl et al. 2022 ("Robbing the Fed", ICLR): it sends the
clients the task model behind an imprint block (:mod:`attacks.imprint`), its thresholds
set from data it holds (the test split's mean pixel), and reads the round's samples back
from the block's part of the aggregate update -- the global model after the round minus
the one it sent -- which is all it needs, so secure aggregation does not stop it.  Its
table ``[imprint]`` switches it on and sets the block and the round it reads; the
``imprint`` audit stage scores what it reads against the round's samples."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from fedaudit.options import option
from fedaudit.servers.base import Server, register_server

__all__ = ["ImprintReadout", "ImprintServer", "TABLE"]

TABLE = {
    "enabled": option(bool, False, "the server sends the model behind an imprint block and "
                      "rebuilds the round's samples from the aggregate update"),
    "bins": option(int, 256, "the block's bins k (expected share recovered: (k/(k+1))^N "
                   "for N samples in the round)", min=1),
    "gain": option(float, 1e6, "the block's signal: its update grows with it while its own "
                   "weights shrink (it must stand out of float32 rounding and SecAgg+'s "
                   "quantisation)", min=0.0, min_exclusive=True),
    "round": option(int, 1, "the round attacked", min=1),
    "near_exact_db": option(float, 40.0, "PSNR (dB) from which a candidate counts as "
                            "recovered near-exactly", min=0.0),
}


@dataclass(frozen=True)
class ImprintReadout:
    """What the server reads from a round: one candidate image per bin whose bias changed
    (``images`` (n, *shape), ``bins`` (n,), in bin order) and the block's bias update
    (k,), by which :func:`attacks.imprint.strongest_candidates` ranks them."""

    images: np.ndarray
    bins: np.ndarray
    bias_update: np.ndarray


@register_server
class ImprintServer(Server):
    kind = "imprint"
    malicious = True
    options = {"imprint": TABLE}
    sections = ("malicious_server",)
    threat_model = {
        "position": "malicious server",
        "does": ["sends the clients the task model behind an imprint block of its own (Fowl et "
                 "al. 2022, 'Robbing the Fed')", "sets the block's thresholds from data it "
                 "holds (the test split's mean pixel)"],
        "knows": ["the global model it sent", "the aggregate the round released (under "
                  "secure aggregation: nothing else)"],
        "does_not_know": ["any client's update", "the clients' samples or labels"],
    }

    def active(self, scenario):
        return bool(scenario.stages["imprint"]["enabled"])

    def serve(self, model, scenario, data):
        from attacks.imprint import imprint_block_for, imprinted

        t = scenario.stages["imprint"]
        return imprinted(model, imprint_block_for(data.x[data.test], t["bins"], t["gain"]))

    def read_back(self, sent: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor],
                  input_shape: tuple[int, ...]) -> ImprintReadout:
        """The candidates from the block's update between the model it sent and the one
        after the round (:func:`attacks.imprint.recover_images`)."""
        from attacks.imprint import block_update, recover_images

        dw, db = block_update(sent, after)
        # the weights are float32: bins no sample reached carry their rounding (about 1e-7
        # of them); 1e-3 of the largest bias difference keeps the reached ones
        images, bins = recover_images(dw, db, input_shape, rtol=1e-3)
        return ImprintReadout(images, bins, db)
