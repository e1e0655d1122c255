"""What the server holds of one client in one round, as the attacks on updates get it
(the label-leakage and reconstruction families, issue 39): the global model the client
started from, the update it sent, and what the server knows of its local training -- the
threat model of an honest-but-curious server that built the model and wrote the training
recipe.  The client's true samples are never part of a case: they are the audit's ground
truth, which only the metrics see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

__all__ = ["LocalTraining", "UpdateCase"]


@dataclass(frozen=True)
class LocalTraining:
    """What the server knows of a client's local training in one round: the scenario's
    ``[train]`` recipe and the reply's ``num_examples``."""

    lr: float
    #: SGD momentum (0.0: plain SGD)
    momentum: float
    weight_decay: float
    #: "sgd" or "adam" (what an attack that unrolls the local steps must simulate)
    optimizer: str
    local_epochs: int
    batch_size: int
    #: the samples the client trained on this round (its reply's ``num-examples``)
    num_examples: int

    def __post_init__(self) -> None:
        if not (self.lr > 0 and self.local_epochs >= 1 and self.batch_size >= 1
                and self.num_examples >= 1):
            raise ValueError(f"LocalTraining needs lr > 0 and local_epochs, batch_size, "
                             f"num_examples >= 1; got {self}")

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.num_examples / self.batch_size)

    @property
    def steps(self) -> int:
        """Local optimizer steps in the round: ``local_epochs * ceil(n / batch_size)``."""
        return self.local_epochs * self.steps_per_epoch


@dataclass(frozen=True)
class UpdateCase:
    """One client's update of one round, and what the server knows around it."""

    #: the architecture (white box); an attack loads ``start`` into a copy of it
    model: torch.nn.Module
    #: the global model the client started from (state_dict)
    start: Mapping[str, torch.Tensor]
    #: w_client - w_start, float64, by state_dict key, as the server received it
    update: Mapping[str, torch.Tensor]
    training: LocalTraining
    #: one sample's shape, e.g. (C, H, W)
    input_shape: tuple[int, ...]
    num_classes: int
    #: the value range of one input coordinate (the data's: (0.0, 1.0) for images here)
    box: tuple[float, float]
    #: the training loss of a batch, ``loss(logits, labels)`` (the mean over the batch:
    #: :func:`fedaudit.training.losses.batch_loss`)
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

    def __post_init__(self) -> None:
        missing = sorted(set(self.start) - set(self.update))
        if missing:
            raise ValueError(f"the update lacks state_dict entries {missing[:3]} of the start "
                             "model")
        low, high = self.box
        if not low < high:
            raise ValueError(f"box = {self.box!r}: needs low < high")

    def single_gradient(self) -> bool:
        """Whether the update is one local SGD step (:meth:`gradient` recovers its batch
        gradient exactly)."""
        return self.training.steps == 1 and self.training.optimizer == "sgd"

    def gradient(self) -> dict[str, torch.Tensor]:
        """The batch gradient behind a one-step SGD update, per trainable parameter:
        ``w' = w - lr (g + weight_decay w)`` gives ``g = -update / lr - weight_decay w``
        (momentum does not act on the first step); float64.  ``ValueError`` for an update
        of several steps or of Adam (then an attack must unroll the local training)."""
        if not self.single_gradient():
            raise ValueError(f"the update is {self.training.steps} {self.training.optimizer} "
                             "steps, not one SGD step: its gradient is not observed")
        t = self.training
        return {name: -self.update[name].double() / t.lr
                - t.weight_decay * self.start[name].double()
                for name, _ in self.model.named_parameters()}
