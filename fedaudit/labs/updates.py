"""Lab 10's material: one client's round on the bundled digits, as the server receives it.

:func:`client_update` trains a copy of an untrained fedaudit MLP on ``n`` digits with the
real local training (:func:`fedaudit.training.train_local`: SGD, or Opacus DP-SGD) and
returns a :class:`ClientUpdate`: the model the client started from, the model it sent,
the recipe the server knows, and the client's true samples (the lab's ground truth: an
attack never reads them).  :func:`reconstruct` is fedaudit's own attack on it (Inverting
Gradients, :mod:`attacks.reconstruction`), :func:`matched_psnr` the score of a
reconstruction (:mod:`fedaudit.image_metrics`).  No federation is trained: each update
takes a fraction of a second.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = ["ClientUpdate", "ImprintRound", "client_update", "digits", "imprinted_round",
           "matched_psnr", "reconstruct"]

#: the MLP's hidden width parameter (hidden layers of 8 * WIDTH units) and its seed
WIDTH, MODEL_SEED = 16, 0


def digits() -> tuple[np.ndarray, np.ndarray]:
    """fedaudit's bundled digits: images (1797, 1, 8, 8) in [0, 1] and labels."""
    from fedaudit.data.datasets import load_digits_dataset
    from fedaudit.scenario import DataConfig

    data = load_digits_dataset(DataConfig())
    return data.x, data.y


@dataclass(frozen=True)
class ClientUpdate:
    """One client's round as the server holds it, and (``x``, ``y``) its true samples."""

    #: the global model the client started from (its weights are ``start``)
    model: nn.Module
    start: dict[str, torch.Tensor]
    #: the model the client sent back
    received: dict[str, torch.Tensor]
    lr: float
    epochs: int
    batch_size: int
    num_examples: int
    #: the client's true images and labels: ground truth for the checks, never an input
    x: np.ndarray
    y: np.ndarray

    def update(self, name: str) -> torch.Tensor:
        """``received - start`` of parameter ``name`` (float64)."""
        return self.received[name].double() - self.start[name].double()

    def case(self):
        """The :class:`attacks.update_case.UpdateCase` of fedaudit's own attacks."""
        from attacks.update_case import LocalTraining, UpdateCase
        from fedaudit.training.losses import batch_loss

        update = {k: self.update(k) for k in self.start}
        training = LocalTraining(self.lr, 0.0, 0.0, "sgd", self.epochs, self.batch_size,
                                 self.num_examples)
        return UpdateCase(copy.deepcopy(self.model), self.start, update, training,
                          tuple(self.x.shape[1:]), 10, (0.0, 1.0), batch_loss)


def client_update(n: int = 1, *, client: int = 0, epochs: int = 1, batch_size: int | None = None,
                  lr: float = 0.1, noise_multiplier: float | None = None,
                  clip_norm: float = 1.0, seed: int = 0,
                  augment: str = "none") -> ClientUpdate:
    """Client ``client`` holds digits ``client * n .. client * n + n - 1`` and trains the
    untrained MLP on them for ``epochs`` epochs of batches of ``batch_size`` (default n:
    one SGD step per epoch), learning rate ``lr``; with ``noise_multiplier`` it trains with
    DP-SGD (per-sample clipping to ``clip_norm``, Gaussian noise); ``augment`` as
    ``train.augment`` (flip, flip+crop with padding 4: the client trains on views of its
    digits, while ``x`` stays the stored digits)."""
    from fedaudit.models import build_model
    from fedaudit.scenario import TrainConfig
    from fedaudit.training import train_local

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    x, y = digits()
    ids = np.arange(client * n, client * n + n)
    model = build_model("mlp", in_channels=1, image_size=8, num_classes=10, width=WIDTH,
                        seed=MODEL_SEED)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    batch = batch_size or n
    cfg = TrainConfig(local_epochs=epochs, batch_size=batch, optimizer="sgd", lr=lr,
                      momentum=0.0, weight_decay=0.0, device="cpu", augment=augment)
    trained = copy.deepcopy(model)
    dp = None if noise_multiplier is None else {"noise_multiplier": noise_multiplier,
                                                "clip_norm": clip_norm}
    train_local(trained, x, y, ids, cfg, seed=seed, device=torch.device("cpu"), dp=dp)
    received = {k: v.detach().clone() for k, v in trained.state_dict().items()}
    return ClientUpdate(model, start, received, lr, epochs, batch, n, x[ids].copy(),
                        y[ids].copy())


def reconstruct(update: ClientUpdate, *, iterations: int = 300, labels=None,
                seed: int = 0) -> np.ndarray:
    """fedaudit's Inverting Gradients on ``update`` (the true labels unless ``labels``):
    the reconstructed images (n, 1, 8, 8)."""
    from attacks.reconstruction import Budget, get_reconstruction

    rec = get_reconstruction("inverting-gradients")(
        update.case(), num_samples=update.num_examples,
        labels=update.y if labels is None else np.asarray(labels),
        budget=Budget(iterations), seed=seed)
    return rec.images


def matched_psnr(images, true: np.ndarray) -> np.ndarray:
    """PSNR (dB, [0, 1] images) of each true image against the reconstruction an optimal
    assignment gives it (:func:`fedaudit.image_metrics.reconstruction_metrics`)."""
    from fedaudit.image_metrics import reconstruction_metrics

    rec = np.asarray(images)
    zeros = np.zeros(len(rec), np.int64)
    met = reconstruction_metrics(rec, zeros, true, np.zeros(len(true), np.int64),
                                 true.mean(axis=0), data_range=1.0, win_size=7)
    return np.asarray(met.psnr, dtype=np.float64)


@dataclass(frozen=True)
class ImprintRound:
    """One round of a malicious server (Fowl et al. 2022, :mod:`attacks.imprint`): the model
    it sent (``start``, the MLP behind an imprint block of ``bins`` bins) and the mean of
    the clients' models (``aggregate``: all that secure aggregation releases); ``x`` holds
    the round's true digits (ground truth for the checks, never an input)."""

    start: dict[str, torch.Tensor]
    aggregate: dict[str, torch.Tensor]
    bins: int
    x: np.ndarray


def imprinted_round(clients: int = 4, n: int = 4, *, bins: int = 64, lr: float = 0.1
                    ) -> ImprintRound:
    """``clients`` clients of ``n`` digits each (client c: digits 100 c .. 100 c + n - 1)
    take one SGD step on the imprinted MLP the server sent; the server averages their
    models (equal weights, as SecAgg+'s weighted mean of equal clients)."""
    from attacks.imprint import imprint_block_for, imprinted
    from fedaudit.models import build_model

    x, y = digits()
    block = imprint_block_for(x[1000:], bins)
    model = imprinted(build_model("mlp", in_channels=1, image_size=8, num_classes=10,
                                  width=WIDTH, seed=MODEL_SEED), block)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    models, seen = [], []
    for c in range(clients):
        ids = np.arange(100 * c, 100 * c + n)
        model.load_state_dict(start)
        loss = nn.functional.cross_entropy(model(torch.from_numpy(x[ids])),
                                           torch.from_numpy(y[ids]).long())
        grads = torch.autograd.grad(loss, list(model.parameters()))
        models.append({name: (p - lr * g).detach() for (name, p), g
                       in zip(model.named_parameters(), grads)})
        seen.append(ids)
    aggregate = {k: torch.stack([m[k] for m in models]).mean(0) for k in models[0]}
    ids = np.concatenate(seen)
    return ImprintRound(start, aggregate, bins, x[ids].copy())
