"""Data augmentation in local training (``train.augment``): the CIFAR recipe of the LiRA
and RMIA papers' targets, Flower's CIFAR baselines and the gradient-inversion papers'
trained models -- a random horizontal flip, and a random crop of the image padded by
``train.augment_padding`` pixels on every side (torchvision's ``RandomHorizontalFlip()``
and ``RandomCrop(size, padding=p)``).

- ``none``: the samples as they are (the default; nothing is drawn, so a run without
  augmentation is the same bits as before the option existed);
- ``flip``: each image mirrored left-right with probability 1/2;
- ``flip+crop``: ``flip``, then each image shifted by (dy, dx) drawn uniformly from
  [-p, p]^2, the vacated border zero (a crop of the zero-padded image).

Each sample of each batch draws its own view, from a generator seeded by the client's
training seed on a stream of its own (:func:`augment_generator`): the batch order is the one
training without augmentation draws, and a client's views in round r depend only on
(seed, round, client), so runs are deterministic and ``--resume`` repeats them.  The views
are drawn on the CPU and applied where the batch lives, so CPU and GPU draw the same views.

The fill is zero *in the model's input space* (the data are already scaled), the same fill
as LiRA's shifted queries (:mod:`attacks.membership.augment`): with p >= 2 every one of
those queries is a view the model could have trained on.  Images only: text data refuses
``train.augment`` in validation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from fedaudit.registry import Registry

__all__ = ["AUGMENTATIONS", "Augmenter", "augment_generator", "random_crop", "random_flip",
           "register_augmentation"]

#: ``fn(x, gen, padding) -> x'``: a batch (B, C, H, W) -> its augmented views, drawn from
#: the CPU generator ``gen``
AugmentFn = Callable[[torch.Tensor, torch.Generator, int], torch.Tensor]

AUGMENTATIONS: Registry[str, AugmentFn] = Registry("augmentation",
                                                   name_pattern=r"[a-z][a-z0-9+_-]*")


def register_augmentation(name: str, *, replace: bool = False):
    """Decorator: register ``fn(x, gen, padding)`` as ``train.augment = name``."""
    return AUGMENTATIONS.register(name, replace=replace)


def random_flip(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each image mirrored left-right with probability 1/2 (one draw per image)."""
    mirror = (torch.rand(len(x), generator=gen) < 0.5).to(x.device)
    return torch.where(mirror[:, None, None, None], x.flip(-1), x)


def random_crop(x: torch.Tensor, gen: torch.Generator, padding: int) -> torch.Tensor:
    """Each image (B, C, H, W) cropped from itself zero-padded by ``padding`` pixels: its
    window's corner (oy, ox) drawn uniformly from {0..2p}^2, i.e. a shift by
    (p - oy, p - ox)."""
    b, c, h, w = x.shape
    corner = torch.randint(0, 2 * padding + 1, (2, b), generator=gen).to(x.device)
    padded = F.pad(x, (padding, padding, padding, padding))
    rows = corner[0][:, None] + torch.arange(h, device=x.device)  # (B, H)
    cols = corner[1][:, None] + torch.arange(w, device=x.device)  # (B, W)
    # each image's window as flat offsets into its padded plane: one gather (3x faster on
    # CPU than batched advanced indexing, and the same copy of the same pixels)
    flat = rows[:, :, None] * (w + 2 * padding) + cols[:, None, :]
    index = flat.reshape(b, 1, h * w).expand(b, c, h * w)
    return padded.flatten(2).gather(2, index).reshape(b, c, h, w)


@register_augmentation("none")
def _none(x: torch.Tensor, gen: torch.Generator, padding: int) -> torch.Tensor:
    return x


@register_augmentation("flip")
def _flip(x: torch.Tensor, gen: torch.Generator, padding: int) -> torch.Tensor:
    return random_flip(x, gen)


@register_augmentation("flip+crop")
def _flip_crop(x: torch.Tensor, gen: torch.Generator, padding: int) -> torch.Tensor:
    return random_crop(random_flip(x, gen), gen, padding)


AUGMENTATIONS.mark_builtin()


def augment_generator(seed: int) -> torch.Generator:
    """The views' generator of a local training seeded ``seed``: its own stream (4; DP-SGD's
    sampler, noise and canaries use 1-3), so augmenting leaves the batch order alone."""
    return torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed, 4]).generate_state(1)[0]))


class Augmenter:
    """The augmentation of one local training: ``augmenter(xb)`` -> the batch's views."""

    def __init__(self, name: str, padding: int, seed: int):
        self.name, self.padding = name, int(padding)
        self._fn = AUGMENTATIONS.get(name)
        self._gen = augment_generator(seed) if name != "none" else None

    def __call__(self, xb: torch.Tensor) -> torch.Tensor:
        if self._gen is None or len(xb) == 0:
            return xb
        if xb.ndim != 4:
            raise ValueError(f"train.augment = {self.name!r} needs images (B, C, H, W); the "
                             f"batch is {tuple(xb.shape)}")
        return self._fn(xb, self._gen, self.padding)
