"""Augmented queries for LiRA (Carlini et al., S&P 2022, section VI-B): the attacker
queries each sample and fixed augmentations of it, on the target and on every reference,
and fits one Gaussian per augmentation.

The views of ``attack.lira.augment``:

- ``none``: the sample itself (1 query);
- ``flip``: the sample and its horizontal mirror (2 queries);
- ``flip+shift``: those two, each also shifted by 2 pixels left, right, up and down with
  zero fill (the padding-and-crop of CIFAR training) -- 10 queries.

The paper's gain needs views the models trained on: :func:`trained_queries` gives the
largest of these sets that a model trained with ``train.augment``
(:mod:`fedaudit.training.augment`) has seen -- what LiRA's ``augment = "auto"`` queries --
and :func:`untrained_queries` says which asked-for views it never saw.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AUGMENTATIONS", "augmented_views", "trained_queries", "untrained_queries"]

#: the shift of ``flip+shift``, in pixels
SHIFT = 2
#: the translations of ``flip+shift``: (rows, columns)
SHIFTS = ((0, 0), (0, -SHIFT), (0, SHIFT), (-SHIFT, 0), (SHIFT, 0))

AUGMENTATIONS = ("none", "flip", "flip+shift")


def _shift(x: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``x`` (N, C, H, W) moved by (dy, dx) pixels, the vacated border zero."""
    out = np.zeros_like(x)
    h, w = x.shape[-2:]
    src_y = slice(max(0, -dy), h - max(0, dy))
    dst_y = slice(max(0, dy), h - max(0, -dy))
    src_x = slice(max(0, -dx), w - max(0, dx))
    dst_x = slice(max(0, dx), w - max(0, -dx))
    out[..., dst_y, dst_x] = x[..., src_y, src_x]
    return out


def augmented_views(x: np.ndarray, mode: str) -> list[np.ndarray]:
    """The views of ``x`` that ``mode`` queries, the sample itself first."""
    if mode not in AUGMENTATIONS:
        raise ValueError(f"augment = {mode!r}; allowed: {', '.join(AUGMENTATIONS)}")
    if mode == "none":
        return [x]
    if x.ndim != 4:
        raise ValueError(f"augment = {mode!r} needs images (N, C, H, W); the samples are "
                         f"{'x'.join(map(str, x.shape[1:]))}: use augment = 'none'")
    views = [x, x[..., ::-1].copy()]
    if mode == "flip":
        return views
    return [_shift(v, dy, dx) for v in views for dy, dx in SHIFTS]


def trained_queries(train_augment: str, padding: int) -> str:
    """The largest query set of :data:`AUGMENTATIONS` whose every view a model trained with
    ``train.augment = train_augment`` (padding ``padding``) could have trained on: ``flip``
    for ``flip``; ``flip+shift`` for ``flip+crop`` when its shifts reach :data:`SHIFT`
    pixels (padding >= 2), else ``flip``; ``none`` otherwise (an augmentation this module
    does not know included)."""
    if train_augment == "flip+crop":
        return "flip+shift" if padding >= SHIFT else "flip"
    return "flip" if train_augment == "flip" else "none"


def untrained_queries(query: str, train_augment: str, padding: int) -> str | None:
    """What of the views ``query`` asks for no model trained with ``train_augment`` saw
    (None: every view is one it could have trained on)."""
    seen = trained_queries(train_augment, padding)
    if AUGMENTATIONS.index(query) <= AUGMENTATIONS.index(seen):
        return None
    if seen == "none":
        missing = "mirrored" + (" and shifted" if query == "flip+shift" else "") + " views"
    else:  # query flip+shift beyond a flip (or a crop of padding 1)
        missing = f"views shifted by {SHIFT} pixels"
    crop = f" (padding {padding})" if train_augment == "flip+crop" else ""
    return (f"attack.lira.augment = {query!r} queries {missing}, which training "
            f"(train.augment = {train_augment!r}{crop}) never showed the models: such queries "
            f"add noise rather than evidence (docs/validation.md section 9); 'auto' queries "
            f"{seen!r}")
