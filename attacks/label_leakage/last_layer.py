"""What the label attacks read of a case: the last layer's gradient behind the update, and
the model's outputs on dummy inputs.

Notation (docs/algorithms.md section 13).  The last layer is the model's last
``nn.Linear``, whose output is the logits: ``z = W h + b`` with W (C, D), h (D,) its
input, b (C,).  For the training loss of the client's batch of N samples, the mean
cross-entropy, softmax p_k = softmax(z_k) and one-hot labels y_k:

    dL/dW = (1/N) sum_k (p_k - y_k) h_k^T          dL/db = (1/N) sum_k (p_k - y_k)

so row j of dL/dW sums to ``g_j = (1/N) sum_k (p_kj - y_kj) S_k`` with ``S_k = sum_d h_kd``
(the activation sum).  Every attack of the family starts from these rows.

**Which gradient.**  A one-step SGD update (``case.single_gradient()``) gives the batch
gradient exactly (:meth:`UpdateCase.gradient`).  A multi-step SGD update (E epochs of
ceil(N / b) steps, T steps in all, momentum mu, weight decay lambda) is read as a
weighted average of its steps' gradients (:func:`observed_gradient`): torch's SGD moves
``w_T - w_0 = -lr sum_t v_t`` with ``v_t = mu v_(t-1) + g_t + lambda w_(t-1)``, so

    -update / lr = sum_t omega_t (g_t + lambda w_(t-1)),   omega_t = sum_(i=0)^(T-t) mu^i

and ``g_bar = -update / (lr sum_t omega_t) - lambda w_0 = sum_t (omega_t / Omega) g_t``
up to the weight decay's drift (w_(t-1) taken as w_0).  With a model that did not move
during the round and batches of equal size, ``g_bar`` is the gradient of the mean loss
over all N samples (each epoch counts every sample once): a batch of N.  That is the
approximation (Geng et al. 2021, "Towards General Deep Leakage in Federated Learning",
and Dimitrov et al. 2022, "Data Leakage in Federated Averaging", TMLR, read a FedAvg
update this way); the model does move, and a last smaller batch weighs its samples
more.  The weights ``omega_t / Omega`` are kept (:attr:`LastLayerGradient.step_weights`)
so that statistics along the path are averaged the same way.  Adam is refused: its
update is not a linear function of the gradients.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attacks.update_case import UpdateCase
from fedaudit.options import option

__all__ = ["DUMMY_KINDS", "DUMMY_OPTIONS", "LastLayerGradient", "OutputStatistics", "dummy_inputs",
           "end_state", "last_linear", "observed_gradient", "output_statistics"]

#: the dummy inputs an attack can feed the model: uniform in the data's box, or every
#: coordinate at the box's low or high end (Wainakh et al.'s LLG* zero / one dummies when
#: the box is (0, 1))
DUMMY_KINDS = ("uniform", "low", "high")

#: the options of the attacks that run the model on dummy inputs
DUMMY_OPTIONS = {
    "dummies": option(int, 64, "dummy inputs the model statistics are averaged over",
                      min=1),
    "dummy": option(str, "uniform", "dummy inputs: uniform in the data's box, or every "
                    "coordinate at its low or high end", choices=DUMMY_KINDS),
    "seed": option(int, 0, "seed of the uniform dummy inputs", min=0),
}


def last_linear(model: nn.Module, num_classes: int) -> tuple[str, nn.Linear]:
    """The model's last ``nn.Linear`` (module order) and its name; ``ValueError`` when there
    is none or it does not map to ``num_classes`` outputs."""
    found = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not found:
        raise ValueError("the model has no nn.Linear layer: the label attacks read the last "
                         "linear layer's gradient")
    name, layer = found[-1]
    if layer.out_features != num_classes:
        raise ValueError(f"the model's last nn.Linear {name!r} has {layer.out_features} "
                         f"outputs, not the {num_classes} classes")
    return name, layer


@dataclass(frozen=True)
class LastLayerGradient:
    """The last layer's gradient as the server reads it from one update (float64)."""

    #: (C, D) dL/dW of the batch's mean loss (averaged over the steps: ``exact`` False)
    weight: np.ndarray
    #: (C,) dL/db, None for a layer without bias
    bias: np.ndarray | None
    #: N, the samples of the round (the reply's ``num_examples``)
    num_samples: int
    #: (T,) omega_t / Omega, the weight of each local step in the average (sums to 1)
    step_weights: np.ndarray
    #: one SGD step: the batch gradient itself; otherwise the weighted step average
    exact: bool
    #: (C,) how far rounding in the client's float arithmetic can have moved each row sum
    #: of ``weight``, and each entry of ``bias`` (None without bias): ``eps T |w| / (lr
    #: Omega)`` summed over the row, |w| the larger of the start and end magnitudes, eps
    #: the machine epsilon of the model's dtype (each step's ``w - lr v`` rounds to half
    #: an ulp of w)
    row_sum_tolerance: np.ndarray
    bias_tolerance: np.ndarray | None

    @property
    def steps(self) -> int:
        return len(self.step_weights)

    def row_sums(self) -> np.ndarray:
        """g_j = sum_d dL/dW_jd, (C,)."""
        return self.weight.sum(axis=1)

    def describe(self) -> str:
        """For a guess's ``info``: how the gradient was obtained."""
        return ("one-step gradient" if self.exact
                else f"update averaged over {self.steps} steps")


def _momentum_weights(steps: int, momentum: float) -> np.ndarray:
    """omega_t = sum_(i=0)^(T-t) mu^i for t = 1..T: how often step t's gradient enters the
    sum of the momentum buffers (the last step once)."""
    omega = np.empty(steps, dtype=np.float64)
    acc = 0.0
    for t in range(steps - 1, -1, -1):
        acc = 1.0 + momentum * acc
        omega[t] = acc
    return omega


def observed_gradient(case: UpdateCase) -> LastLayerGradient:
    """The last layer's gradient behind ``case``'s update: exact for one SGD step, the
    momentum-weighted step average for several (module docstring); ``ValueError`` for
    Adam or a model whose last linear layer the update lacks."""
    t = case.training
    if t.optimizer != "sgd":
        raise ValueError(f"the update is {t.optimizer}: the label attacks read SGD updates "
                         "only (an Adam update is not a linear function of the gradients)")
    name, layer = last_linear(case.model, case.num_classes)
    keys = [f"{name}.weight"] + ([f"{name}.bias"] if layer.bias is not None else [])
    missing = [k for k in keys if k not in case.start]
    if missing:
        raise ValueError(f"the start model lacks {missing[0]!r}, the last nn.Linear's "
                         "parameter: the model and its state_dict disagree")
    omega = _momentum_weights(t.steps, t.momentum)
    if case.single_gradient():
        grad = case.gradient()
        rows = {k: grad[k] for k in keys}
    else:
        rows = {k: -case.update[k].double() / (t.lr * float(omega.sum()))
                - t.weight_decay * case.start[k].double() for k in keys}
    tol = {}
    for k in keys:
        start = case.start[k]
        eps = torch.finfo(start.dtype).eps if start.is_floating_point() else 0.0
        size = torch.maximum(start.double().abs(), (start.double() + case.update[k]).abs())
        tol[k] = (eps * t.steps / (t.lr * float(omega.sum())) * size).cpu().numpy()
    numpy = {k: v.detach().cpu().numpy() for k, v in rows.items()}
    bias = keys[1] if len(keys) > 1 else None
    return LastLayerGradient(numpy[keys[0]], numpy[bias] if bias else None, t.num_examples,
                             omega / omega.sum(), case.single_gradient(),
                             tol[keys[0]].sum(axis=1), tol[bias] if bias else None)


def end_state(case: UpdateCase) -> dict[str, torch.Tensor]:
    """The client's model after the round, ``start + update`` (float entries; the others as
    at the start)."""
    return {k: (v.double() + case.update[k].double()) if v.is_floating_point() else v
            for k, v in case.start.items()}


def dummy_inputs(case: UpdateCase, count: int, kind: str, seed: int) -> torch.Tensor:
    """``count`` float64 inputs of ``case.input_shape``: uniform in ``case.box`` (a torch
    Generator seeded with ``seed``), or every coordinate at the box's low or high end."""
    if kind not in DUMMY_KINDS:
        raise ValueError(f"dummy = {kind!r}; allowed: {', '.join(DUMMY_KINDS)}")
    if count < 1:
        raise ValueError(f"dummies = {count}: needs at least 1")
    low, high = (float(v) for v in case.box)
    shape = (count, *case.input_shape)
    if kind == "low":
        return torch.full(shape, low, dtype=torch.float64)
    if kind == "high":
        return torch.full(shape, high, dtype=torch.float64)
    gen = torch.Generator().manual_seed(int(seed))
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=torch.float64)


@dataclass(frozen=True)
class OutputStatistics:
    """The model's outputs on inputs: softmax ``probs`` (n, C) and ``activation_sums`` (n,),
    the sum S of the last layer's input for each input."""

    probs: np.ndarray
    activation_sums: np.ndarray

    def mean_probs(self) -> np.ndarray:
        return self.probs.mean(axis=0)

    def mean_activation_sum(self) -> float:
        return float(self.activation_sums.mean())


@torch.no_grad()
def output_statistics(case: UpdateCase, state: Mapping[str, torch.Tensor],
                      inputs: torch.Tensor) -> OutputStatistics:
    """Run a float64 copy of ``case.model`` holding ``state`` on ``inputs``, in eval mode
    (no dropout; fedaudit's models have no BatchNorm, so their outputs are those of
    training); ``ValueError`` when the model's output is not its last linear layer's
    output (the logits this family reads)."""
    model = copy.deepcopy(case.model).to(device="cpu", dtype=torch.float64)
    model.load_state_dict(dict(state))
    model.eval()
    name, layer = last_linear(model, case.num_classes)
    seen: dict[str, torch.Tensor] = {}

    def keep(module, args, output):
        seen["h"], seen["z"] = args[0], output

    handle = layer.register_forward_hook(keep)
    try:
        out = model(inputs.to(torch.float64))
    finally:
        handle.remove()
    if "z" not in seen or not torch.equal(out, seen["z"]):
        raise ValueError(f"the model's output is not its last nn.Linear {name!r}'s output: "
                         "the label attacks read that layer as the logits")
    h = seen["h"].reshape(len(inputs), -1)
    return OutputStatistics(torch.softmax(out, dim=1).numpy(), h.sum(dim=1).numpy())
