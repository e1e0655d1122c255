"""Stub models and a probability table that the attack tests share."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


BUILTIN = ("resmia", "loss", "confidence", "entropy", "mentropy")


class LookupModel(nn.Module):
    """Stub classifier: input (N, 1, 1, 1) holds a row index; output = log P[row].

    softmax(log P[row]) = P[row], so the oracle's probabilities are exactly P. The table is
    a float64 buffer (no parameters), so the oracle queries in float64.
    """

    def __init__(self, proba: np.ndarray) -> None:
        super().__init__()
        with np.errstate(divide="ignore"):
            self.register_buffer("logp", torch.from_numpy(np.log(proba)))
        self.calls: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.append(int(x.shape[0]))
        return self.logp[x.reshape(-1).long()]


def index_inputs(n: int) -> torch.Tensor:
    """Inputs 0..n-1 for LookupModel: sample i is row i of its table."""
    return torch.arange(n, dtype=torch.float64).reshape(n, 1, 1, 1)


def small_cnn(num_classes: int = 3) -> nn.Module:
    """An untrained CNN for 1x8x8 images, with BatchNorm and Dropout (the oracle must put it
    in eval mode)."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Flatten(),
        nn.Linear(4 * 8 * 8, num_classes),
    )


P = np.array(
    [
        [0.5, 0.25, 0.25],
        [0.1, 0.8, 0.1],
        [0.7, 0.2, 0.1],
        [1.0, 0.0, 0.0],  # label 1 has probability 0: exercises the eps clipping
    ]
)
Y = np.array([0, 1, 2, 1])
