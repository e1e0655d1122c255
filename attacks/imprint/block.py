"""The malicious server's imprint block: Fowl, Geiping, Czaja, Goldblum, Goldstein, "Robbing
the Fed: Directly Obtaining Private Data in Federated Learning with Modified Models", ICLR
2022.

The server puts a block in front of the task model before it sends it.  For an input x
(flattened, d values) the block computes k "bins"

    h_i = ReLU((<m, x> - c_i) / gain),   i = 1..k,   c_1 < c_2 < ... < c_k

with one measurement m for every bin (here the mean pixel, m = 1/d: the paper's
brightness measurement) and thresholds c_i at the quantiles i / (k + 1) of a Gaussian fit
N(mu, sigma^2) of the measurement (the server estimates mu and sigma from data of its own),
so that each of the k + 1 intervals (-inf, c_1], (c_1, c_2], ..., (c_k, inf) holds a
share 1 / (k + 1) of the samples.  The block returns

    x + reshape(v * sum_i h_i),   v = gain / d (every pixel)

Every bin reaches the task model through the same output direction v, so dL/dh_i is the
same for every bin i of a sample; the residual keeps the task model's input close to x
(it adds sum_i ReLU(<m, x> - c_i) / d to every pixel, whatever the gain), so the clients
can still learn.  ``gain`` sets the signal: dL/dh, hence the block's update, grows with it
while the block's own weights (1 / (gain d), -c_i / gain) shrink -- the update must stand
out of the weights' float32 rounding and, under secure aggregation, of SecAgg+'s
quantisation step (docs/validation.md section 15 measures both).

A sample j with <m, x_j> in (c_i, c_{i+1}] activates bins 1..i.  With g_j = dL/dh (the same
for every bin), the gradient of the first layer is

    dL/dW_i = sum_{j: <m,x_j> > c_i} g_j x_j,     dL/db_i = sum_{j: <m,x_j> > c_i} g_j,

so (dL/dW_i - dL/dW_{i+1}) / (dL/db_i - dL/db_{i+1}) = x_j exactly when x_j is alone in its
interval (:func:`attacks.imprint.recover.recover_images`).  The same holds for any
positively weighted sum of such gradients -- an aggregate over clients, secure aggregation's
included -- and for one local SGD step (the update is -lr times the gradient).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["BLOCK_BIAS", "BLOCK_WEIGHT", "ImprintBlock", "block_update", "gaussian_thresholds",
           "imprint_block_for", "imprinted"]

#: the state-dict keys of the block's first layer in the model :func:`imprinted` builds
BLOCK_WEIGHT, BLOCK_BIAS = "0.linear0.weight", "0.linear0.bias"


def gaussian_thresholds(mu: float, sigma: float, bins: int) -> np.ndarray:
    """c_i = mu + sigma * Phi^-1(i / (bins + 1)), i = 1..bins: k + 1 intervals of equal
    mass under N(mu, sigma^2)."""
    from scipy.stats import norm

    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins = {bins!r}: must be an integer >= 1")
    if not (math.isfinite(mu) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"mu = {mu!r}, sigma = {sigma!r}: need finite numbers, sigma > 0")
    return mu + sigma * norm.ppf(np.arange(1, bins + 1) / (bins + 1))


class ImprintBlock(nn.Module):
    """The block (module docstring) for inputs of ``input_shape``: ``linear0`` (d -> k,
    every row the mean-pixel measurement over ``gain``, biases -c_i / gain) and
    ``linear1`` (k -> d, every entry ``gain`` / d, no bias), residual."""

    def __init__(self, input_shape: tuple[int, ...], thresholds: np.ndarray,
                 gain: float = 1000.0) -> None:
        super().__init__()
        c = np.asarray(thresholds, dtype=np.float64)
        if c.ndim != 1 or len(c) < 1 or not np.all(np.diff(c) > 0):
            raise ValueError("thresholds must be a strictly increasing 1-d array")
        self.input_shape = tuple(int(s) for s in input_shape)
        d, k = int(np.prod(self.input_shape)), len(c)
        self.linear0 = nn.Linear(d, k)
        self.linear1 = nn.Linear(k, d, bias=False)
        if not (math.isfinite(gain) and gain > 0):
            raise ValueError(f"gain = {gain!r}: must be a finite number > 0")
        with torch.no_grad():
            self.linear0.weight.fill_(1.0 / (gain * d))
            self.linear0.bias.copy_(torch.from_numpy(-c / gain))
            self.linear1.weight.fill_(gain / d)

    @property
    def bins(self) -> int:
        return self.linear0.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.linear0(x.flatten(1)))
        return x + self.linear1(h).view(x.shape)


def imprint_block_for(reference: np.ndarray, bins: int, gain: float = 1000.0) -> ImprintBlock:
    """The block a server builds from data it holds itself, ``reference`` (N, *shape): ``bins``
    thresholds at the Gaussian quantiles (:func:`gaussian_thresholds`) of the mean-pixel
    measurement over ``reference`` (in float64), for inputs of ``reference``'s sample shape."""
    x = np.asarray(reference)
    if x.ndim < 2 or len(x) < 2:
        raise ValueError(f"reference must hold at least 2 samples (N, *shape); got {x.shape}")
    measure = x.reshape(len(x), -1).astype(np.float64).mean(axis=1)
    return ImprintBlock(tuple(x.shape[1:]),
                        gaussian_thresholds(float(measure.mean()), float(measure.std()), bins),
                        gain)


def imprinted(task_model: nn.Module, block: ImprintBlock) -> nn.Sequential:
    """The model the malicious server sends: the block, then the task model (state-dict
    keys ``0.linear0.weight``, ``0.linear0.bias``, ``0.linear1.weight``, ``1.<task>``)."""
    return nn.Sequential(block, task_model)


def block_update(sent: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The block's first-layer update between the model the server sent and the one after
    the round (an :func:`imprinted` model's state dicts), in float64: ``(dW (k, d), db
    (k,))``, the input of :func:`attacks.imprint.recover.recover_images`."""
    missing = [k for k in (BLOCK_WEIGHT, BLOCK_BIAS) if k not in sent or k not in after]
    if missing:
        raise KeyError(f"{missing[0]!r}: not a model with an imprint block in front "
                       "(attacks.imprint.imprinted)")
    return tuple(after[k].double().numpy() - sent[k].double().numpy()  # type: ignore[return-value]
                 for k in (BLOCK_WEIGHT, BLOCK_BIAS))
