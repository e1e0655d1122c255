"""The malicious server of Nasr et al. 2019's active membership attack: at one round it
sends the clients the global model after gradient ascent on the loss of target samples it
wants to test, and reads the aggregate the round releases.  A target that a client holds
is trained on, so its loss falls back sharply; a target no client holds keeps most of the
rise.  The score of a target is the fall of its loss from the model sent to the aggregate
(the ``active-membership`` audit stage); secure aggregation does not stop it, since the
aggregate is all it reads.

M. Nasr, R. Shokri, A. Houmansadr, "Comprehensive Privacy Analysis of Deep Learning:
Passive and Active White-box Inference Attacks against Centralized and Federated Learning",
IEEE S&P 2019, section V-D ("gradient ascent attacker"); its table ``[active_membership]``
switches it on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedaudit.models.registry import model_for
from fedaudit.options import option
from fedaudit.servers.base import Server, register_server

__all__ = ["GradientAscentServer", "TABLE", "ascend", "targets_of"]

TABLE = {
    "enabled": option(bool, False, "the server ascends the loss of target samples in the "
                      "model it sends at one round, and scores them by their loss's fall"),
    "round": option(int, 2, "the round attacked (>= 2: the round before it is the passive "
                    "baseline)", min=2),
    "targets": option(int, 64, "target members (drawn from the clients' samples) and as "
                      "many target non-members (from the holdout split)", min=1),
    "ascent": option(float, 1.0, "step size of the gradient ascent on the targets' mean "
                     "loss", min=0.0, min_exclusive=True),
    "steps": option(int, 1, "gradient-ascent steps", min=1),
    "seed": option(int, 0, "seed of the targets' draw", min=0),
}


def targets_of(t: dict[str, Any], data: Any) -> tuple[np.ndarray, np.ndarray]:
    """The target ids (members first) and whether each is a member: ``targets`` of the
    clients' samples and ``targets`` of the holdout split, drawn with ``seed`` (fewer when a
    split is smaller)."""
    rng = np.random.default_rng(t["seed"])
    members = rng.permutation(np.sort(data.train))[:t["targets"]]
    others = rng.permutation(np.sort(data.holdout))[:t["targets"]]
    ids = np.concatenate([members, others]).astype(np.int64)
    return ids, np.arange(len(ids)) < len(members)


def ascend(model: torch.nn.Module, state: dict[str, torch.Tensor], x: np.ndarray,
           y: np.ndarray, *, ascent: float, steps: int) -> dict[str, torch.Tensor]:
    """``state`` after ``steps`` steps of gradient *ascent* of size ``ascent`` on the mean
    cross-entropy of ``(x, y)`` (in the state's dtype; buffers kept): theta <- theta +
    ascent * grad L(theta)."""
    model.load_state_dict(state)
    model.eval()  # the targets' loss as the clients' first forward sees it (no batch stats)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    xb = torch.as_tensor(x, dtype=next(iter(params.values())).dtype)
    yb = torch.as_tensor(y, dtype=torch.int64)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, g in zip(params.values(), grads):
                p.add_(g, alpha=ascent)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@register_server
class GradientAscentServer(Server):
    kind = "gradient-ascent"
    malicious = True
    options = {"active_membership": TABLE}
    sections = ("active_membership",)
    threat_model = {
        "position": "malicious server",
        "does": ["at one round, sends the clients the global model after gradient ascent on "
                 "the loss of its target samples (Nasr et al. 2019)"],
        "knows": ["the target samples and their labels", "the model it sent", "the "
                  "aggregate the round released (under secure aggregation: nothing else)"],
        "does_not_know": ["which targets are members", "any client's samples"],
    }

    def active(self, scenario):
        return bool(scenario.stages["active_membership"]["enabled"])

    def modify(self, round_, state, scenario, data):
        t = scenario.stages["active_membership"]
        if round_ != t["round"]:
            return None
        ids, _ = targets_of(t, data)
        model = model_for(scenario.model, data, seed=scenario.seed)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the same sent model wherever it is computed
        try:
            return ascend(model, dict(state), data.x[ids], data.y[ids], ascent=t["ascent"],
                          steps=t["steps"])
        finally:
            torch.set_num_threads(threads)
