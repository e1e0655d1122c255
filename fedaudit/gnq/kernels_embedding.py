"""GNQ kernel of ``nn.Embedding``: K_ij = sum_{t,s} [idx_it == idx_js] (b_it . b_js).

Ghost form over the T^2 position pairs, or the per-sample gradients restricted to the U
distinct ids of the batch, whichever is smaller; ``padding_idx`` rows are excluded and
``scale_grad_by_freq`` (batch-dependent gradients) is rejected.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .ghost import Rows, _trainable
from .registry import KERNELS, register_kernel

__all__ = ["embedding_kernel"]


def _embedding_check(module: nn.Module) -> None:
    if module.scale_grad_by_freq:
        raise ValueError(
            "scale_grad_by_freq=True scales gradients by token counts in the whole "
            "mini-batch, so per-sample gradients are not defined"
        )


@register_kernel(nn.Embedding, check=_embedding_check)
def embedding_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """Embedding: K_ij = sum_{t,s} [idx_it == idx_js] (b_it . b_js), padding_idx excluded.

    Ghost form (T^2 pairs) or per-sample gradients restricted to the U distinct ids of the
    batch (B x U x d), whichever is smaller (ghost when T^2 < U).
    """
    if not _trainable(module.weight):
        return None
    B = b.shape[0]
    dim = module.embedding_dim
    idx = a.reshape(B, -1)
    T = idx.shape[1]
    bt = b.reshape(B, T, dim)
    if module.padding_idx is not None:
        bt = bt * (idx != module.padding_idx).unsqueeze(-1).to(bt.dtype)
    flat_idx = idx.reshape(-1)
    uniq, inv = torch.unique(flat_idx, return_inverse=True)
    U = uniq.numel()
    use_ghost = strategy == "ghost" or (strategy == "auto" and T * T < U)
    if use_ghost:
        B2 = bt.reshape(B * T, dim).to(torch.float64)
        same = (flat_idx.unsqueeze(1) == flat_idx.unsqueeze(0)).to(torch.float64)
        return (same.mul_(B2 @ B2.T)).view(B, T, B, T).sum((1, 3))
    rows = torch.arange(B, device=inv.device).repeat_interleave(T) * U + inv
    Gw = torch.zeros(B * U, dim, dtype=bt.dtype, device=bt.device)
    Gw.index_add_(0, rows, bt.reshape(B * T, dim))
    return Rows(Gw.view(B, U * dim))


KERNELS.mark_builtin()
