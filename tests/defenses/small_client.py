"""A small model, a client's data and the training and GNQ configurations that the defense
tests share."""

import dataclasses

import torch
from torch import nn

from fedaudit.scenario import GnqConfig, TrainConfig


CPU = torch.device("cpu")
GNQ_ABS = GnqConfig(client=True, server=True, lam=1e-2, lam_mode="absolute", rho=1e-2)
GNQ_REL = dataclasses.replace(GNQ_ABS, lam_mode="relative")


def gnq_model() -> nn.Module:
    """A small float64 CNN with GroupNorm for 1x5x5 inputs and 4 classes, seeded."""
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.GroupNorm(1, 3), nn.ReLU(),
                         nn.Flatten(), nn.Linear(3 * 5 * 5, 8), nn.ReLU(),
                         nn.Linear(8, 4)).double()


CFG = TrainConfig(local_epochs=2, batch_size=8, optimizer="sgd", lr=0.05, momentum=0.9,
                  weight_decay=0.0, device="cpu")


def client_data(n=37, seed=0):
    """A client's ``n`` random 1x5x5 samples with labels in 0..3 (numpy)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 5, 5, generator=g).numpy()
    y = torch.randint(0, 4, (n,), generator=g).numpy()
    return x, y
