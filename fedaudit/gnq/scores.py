""":func:`gnq_scores`: the GNQ of every sample of one batch, from a fresh forward and backward.

GNQ_j = g_j^T (sum_{k != j} g_k g_k^T + lam I)^{-1} g_j with g_j the gradient of sample j's
own loss (arXiv 2510.10902), computed by the ghost kernels in batch space
(:class:`~fedaudit.gnq.auditor.GhostAuditor`, ghost trick of Li et al., arXiv 2110.05679)
or, as a slow reference, from per-sample gradients in parameter space
(:mod:`fedaudit.gnq.reference`). The model, its ``.grad`` and its hooks are left as they
were; for the GNQ of a training step as it runs, use the auditor itself.
"""

from __future__ import annotations

from typing import Callable, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from .auditor import GhostAuditor
from .core import DEFAULT_LAM, DEFAULT_RHO, validate_options
from .reference import naive_gnq_scores

__all__ = ["METHODS", "gnq_scores"]

METHODS: tuple[str, ...] = ("ghost", "naive")

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _default_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each sample's own loss: the cross-entropy of (B, C) logits, or for (B, L, V)
    next-token logits the sequence's mean token NLL (the training loss of
    :mod:`fedaudit.training.losses`, a layer above)."""
    if outputs.ndim == 3:
        return F.cross_entropy(outputs.transpose(1, 2), targets, reduction="none").mean(1)
    return F.cross_entropy(outputs, targets, reduction="none")


def gnq_scores(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    loss_fn: LossFn | None = None,
    lam: float = DEFAULT_LAM,
    method: Literal["ghost", "naive"] = "ghost",
    lam_mode: Literal["absolute", "relative"] = "absolute",
    rho: float = DEFAULT_RHO,
    normalize: bool = False,
) -> torch.Tensor:
    """Per-sample Gradient Uniqueness of a batch (arXiv 2510.10902).

    GNQ_j = g_j^T (sum_{k != j} g_k g_k^T + lam I)^{-1} g_j, with g_j the gradient of
    sample j's own loss w.r.t. the trainable parameters; computed in batch space as
    h = diag((K + lam I)^{-1} K), GNQ_j = h_j / (1 - h_j) with K = G G^T.

    Args:
        model: the network; used as is (train/eval mode). Parameters, ``.grad`` and
            hooks are left unchanged.
        inputs, targets: one batch (batch on dim 0).
        loss_fn: ``loss_fn(outputs, targets)`` -> per-sample losses (B,); default
            cross-entropy with ``reduction="none"`` (for (B, L, V) outputs the mean token
            NLL of each sequence).
        lam: ridge lambda (absolute, or ignored in favour of ``rho`` in relative mode).
        method: ``"ghost"`` builds K from per-layer ghost kernels (Li et al., arXiv
            2110.05679) in float64; ``"naive"`` materialises per-sample gradients with
            torch.func and solves in parameter space (reference, slow).
        lam_mode: ``"absolute"`` or ``"relative"`` (lam = rho * trace(K) / B).
        rho: relative lambda factor, default 1e-2.
        normalize: use S_j = G_{-j}^T G_{-j} / (B - 1) + lam I.

    Returns:
        float64 tensor (B,), on the model's device.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    lam, lam_mode, rho = validate_options(lam, lam_mode, rho)
    if not isinstance(inputs, torch.Tensor) or inputs.dim() == 0:
        raise ValueError("inputs must be a tensor with the batch on dim 0")
    loss_fn = _default_loss if loss_fn is None else loss_fn
    if method == "naive":
        return naive_gnq_scores(
            model, inputs, targets, loss_fn=loss_fn, lam=lam, lam_mode=lam_mode, rho=rho,
            normalize=normalize,
        )
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters (all requires_grad=False)")
    auditor = GhostAuditor(
        model, lam=lam, lam_mode=lam_mode, rho=rho, loss_reduction="sum",
        normalize=normalize, gram_dtype=torch.float64,
    )
    B = inputs.shape[0]
    with torch.enable_grad(), auditor.capture():
        losses = loss_fn(model(inputs), targets)
        if not isinstance(losses, torch.Tensor) or tuple(losses.shape) != (B,):
            shape = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses)
            raise ValueError(
                f"loss_fn must return one loss per sample, shape ({B},), got {shape}; "
                "use reduction='none'"
            )
        # autograd.grad rather than backward: the hooks fire, .grad stays untouched.
        torch.autograd.grad(losses.sum(), params, allow_unused=True)
    return auditor.scores()
