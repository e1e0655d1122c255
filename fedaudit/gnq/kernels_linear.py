"""GNQ kernel of ``nn.Linear``, on vectors (B, d) or sequences (B, ..., d).

The positions are T = prod(...); the weight's contribution is the exact
:func:`~fedaudit.gnq.ghost._weight_gram` over them, the bias's the Gram of the
per-sample sums of the output gradients.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .ghost import _bias_gram, _trainable, _weight_gram
from .registry import KERNELS, register_kernel

__all__ = ["linear_kernel"]


@register_kernel(nn.Linear)
def linear_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """Linear on vectors (B, d) or sequences (B, ..., d): positions T = prod(...)."""
    if a.dim() < 2:
        raise ValueError(
            f"Linear input of shape {tuple(a.shape)} has no batch dimension; "
            "GNQ needs inputs shaped (B, ..., in_features)"
        )
    B = a.shape[0]
    d, p = a.shape[-1], b.shape[-1]
    A = a.reshape(1, B, -1, d)
    Bm = b.reshape(1, B, -1, p)
    parts = []
    if _trainable(module.weight):
        parts.append(_weight_gram(A, Bm, strategy))
    if _trainable(module.bias):
        parts.append(_bias_gram(Bm[0].sum(1)))
    return parts or None


KERNELS.mark_builtin()
