"""``sparsify``: the client sends only the largest entries of its update (top-k by
magnitude), the defense Zhu et al. propose against gradient inversion ("Deep Leakage from
Gradients", NeurIPS 2019, section 5: pruning the gradients' small entries; they report
the attack failing once more than 20 % are pruned).  No DP guarantee.

For each floating tensor of the model's state (weights, biases and any buffers), with the
update ``u = trained - start`` of n entries, the client keeps the ``k = ceil(keep * n)``
entries of largest ``|u|`` (their trained values) and zeroes the others (the start
values); ties at the k-th magnitude go to the lower index (a stable sort), so the result
is deterministic.
Integer tensors (counters) are sent as trained.
"""

from __future__ import annotations

import math

import torch

from fedaudit.defenses.base import Defense, register_defense
from fedaudit.options import option

KEEP = option(float, 0.1, "sparsify: fraction of each tensor's update entries the client "
              "sends (the largest magnitudes; 1 = the whole update); the rest are zeroed",
              min=0.0, min_exclusive=True, max=1.0)


def top_k_update(start: torch.Tensor, trained: torch.Tensor, keep: float) -> torch.Tensor:
    """The trained values at the ``ceil(keep * n)`` entries of largest ``|trained -
    start|`` (ties: the lower index), the start values elsewhere (a zero update there)."""
    u = (trained - start).reshape(-1)
    k = math.ceil(keep * u.numel())
    order = torch.sort(u.abs(), descending=True, stable=True).indices
    out = start.clone().reshape(-1)
    out[order[:k]] = trained.reshape(-1)[order[:k]]
    return out.reshape(start.shape)


@register_defense
class UpdateSparsification(Defense):
    kind = "sparsify"
    options = {"keep": KEEP}
    dp_audit = "sample"
    server_sees = ("each client's local model as sent: the start model plus the top-k "
                   "entries of its update (defense.keep of each tensor)")

    def client_update(self, cfg, start, trained):
        keep = float(cfg.options["keep"])
        return {name: top_k_update(start[name].to(t.dtype), t, keep)
                if t.is_floating_point() else t for name, t in trained.items()}

    def parameters(self, cfg):
        return {"noise_multiplier": None, "clip_norm": None, "delta": None,
                "keep": float(cfg.options["keep"])}

    def summary(self, cfg, rounds, *, num_clients, num_sampled):
        return {"epsilon": None,
                "accounting": (f"update sparsification: each client sends the top "
                               f"{100 * float(cfg.options['keep']):g} % of each tensor's "
                               "update entries by magnitude; no noise, no DP guarantee"),
                "notes": ["sparsification gives no epsilon; it is measured by the attacks "
                          "(membership, reconstruction), not accounted"]}
