"""Augmented queries for LiRA (Carlini et al., S&P 2022, section VI-B): the attacker
queries each sample and fixed augmentations of it, on the target and on every reference,
and fits one Gaussian per augmentation.

The views of ``attack.lira.augment``:

- ``none``: the sample itself (1 query);
- ``flip``: the sample and its horizontal mirror (2 queries);
- ``flip+shift``: those two, each also shifted by 2 pixels left, right, up and down with
  zero fill (the padding-and-crop of CIFAR training) -- 10 queries.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AUGMENTATIONS", "augmented_views"]

#: the translations of ``flip+shift``: (rows, columns)
SHIFTS = ((0, 0), (0, -2), (0, 2), (-2, 0), (2, 0))

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
