"""The one loss of a sample, for images and for token sequences alike.

A model's output decides the kind: class logits (B, C) with labels (B,) for images,
next-token logits (B, L, V) with targets (B, L) for text.  The loss of sample i is

    images:     l_i = -log softmax(z_i)[y_i]                                (cross-entropy)
    sequences:  l_i = (1/L) sum_t -log softmax(z_i,t)[y_i,t]     (mean token NLL,
                :func:`fedaudit.models.transformer.sequence_loss`)

and the training loss of a batch is their mean (1/B) sum_i l_i.  For images every
function here calls ``F.cross_entropy`` exactly as the loops did before sequences
trained (same arguments, same reduction), so image numbers are bit-identical.  For
sequences the batch mean equals the token-mean cross-entropy over the B L targets, and
GNQ (``loss_reduction="mean"``) and DP-SGD (per-sample gradients of l_i) see one
sequence as one sample.

Correctness: for images ``argmax z_i == y_i`` (B,); for sequences per token
``argmax z_i,t == y_i,t`` (B, L), so the accuracy a run reports on text is the
next-character accuracy over every target token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedaudit.models.transformer import sequence_loss

__all__ = ["batch_loss", "correct", "sample_losses", "summed_loss"]


def _is_sequence(out: torch.Tensor, y: torch.Tensor) -> bool:
    if out.ndim == 2 and y.ndim == 1:
        return False
    if out.ndim == 3 and y.ndim == 2:
        return True
    raise ValueError(f"outputs {tuple(out.shape)} with targets {tuple(y.shape)}: expected "
                     "(B, C) logits with (B,) labels or (B, L, V) logits with (B, L) targets")


def sample_losses(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample loss l_i (B,), in the dtype of ``out``."""
    if not _is_sequence(out, y):
        return F.cross_entropy(out, y, reduction="none")
    return sequence_loss(out, y)


def batch_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The batch mean (1/B) sum_i l_i (images: ``F.cross_entropy(out, y)`` itself)."""
    if not _is_sequence(out, y):
        return F.cross_entropy(out, y)
    return sample_losses(out, y).mean()


def summed_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """sum_i l_i (images: ``F.cross_entropy(out, y, reduction="sum")``); DP-SGD divides
    it by the batch size itself (an empty Poisson batch gives 0)."""
    if not _is_sequence(out, y):
        return F.cross_entropy(out, y, reduction="sum")
    return sample_losses(out, y).sum()


def correct(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Bool (B,) for images, (B, L) per token for sequences: argmax over the last axis."""
    _is_sequence(out, y)
    return out.argmax(-1) == y
