"""Reference ("naive") GNQ: materialised per-sample gradients, parameter-space solve.

This is the independent check of the ghost kernels and of the batch-space formula; it
does not use :func:`fedaudit.gnq.core.gnq_from_gram`, the push-through identity or
Sherman-Morrison. Per-sample gradients come from torch.func (``vmap(grad(...))`` over
``functional_call``), flattened into G (B x P), and every score is the definition
(arXiv 2510.10902)

    GNQ_j = g_j^T S_j^{-1} g_j,   S_j = G_{-j}^T G_{-j} / m + lam I        (float64)

with m = 1 (default) or m = B - 1 (``normalize=True``), solved by a Cholesky
factorisation of the P x P matrix S_j for each j.

When P exceeds ``dense_max_params`` a P x P matrix is out of reach, and the same formula
is evaluated in an orthonormal basis of the span of the gradients: with G^T = Q R
(reduced QR, Q^T Q = I) every g_k = Q c_k with c_k = R[:, k], and because g_j lies in
range(Q), g_j^T S_j^{-1} g_j = c_j^T (C_{-j}^T C_{-j} / m + lam I)^{-1} c_j exactly. This
is a rotation of parameter space, not a different formula.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
from torch.func import functional_call, grad, vmap

from .core import DEFAULT_LAM, DEFAULT_RHO, validate_options
from .kernels import check_batch_statistics

__all__ = ["per_sample_gradients", "naive_gnq_from_gradients", "naive_gnq_scores"]

DENSE_MAX_PARAMS: int = 2048

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def per_sample_gradients(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, loss_fn: LossFn
) -> torch.Tensor:
    """G (B x P, float64): row j is the gradient of sample j's own loss w.r.t. the
    trainable parameters (``requires_grad=True``) in ``model.named_parameters()`` order."""
    for name, module in model.named_modules():
        check_batch_statistics(name, module)
    trainable = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    if not trainable:
        raise ValueError("the model has no trainable parameters (all requires_grad=False)")
    frozen = {n: p.detach() for n, p in model.named_parameters() if not p.requires_grad}
    buffers = {n: b.detach() for n, b in model.named_buffers()}

    def sample_loss(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
        out = functional_call(model, (params, frozen, buffers), (x.unsqueeze(0),))
        loss = loss_fn(out, y.unsqueeze(0))
        if loss.dim() != 1:
            raise ValueError(
                "loss_fn must return one loss per sample (reduction='none'), got a tensor "
                f"of shape {tuple(loss.shape)} for a batch of one"
            )
        return loss.sum()

    grads = vmap(grad(sample_loss), in_dims=(None, 0, 0), randomness="different")(
        trainable, inputs, targets
    )
    B = inputs.shape[0]
    return torch.cat([grads[n].reshape(B, -1).to(torch.float64) for n in trainable], dim=1)


def naive_gnq_from_gradients(
    G: torch.Tensor,
    lam: float = DEFAULT_LAM,
    lam_mode: str = "absolute",
    rho: float = DEFAULT_RHO,
    normalize: bool = False,
    dense_max_params: int = DENSE_MAX_PARAMS,
) -> torch.Tensor:
    """GNQ of each row of G (B x P) from the parameter-space definition (float64).

    Relative mode: lam = rho * ||G||_F^2 / (B m) (= rho * trace(K / m) / B).
    """
    lam, lam_mode, rho = validate_options(lam, lam_mode, rho)
    if G.dim() != 2 or G.shape[0] == 0:
        raise ValueError(f"G must be a non-empty (B x P) matrix, got shape {tuple(G.shape)}")
    G = G.detach().to(torch.float64)
    B, P = G.shape
    if normalize and B < 2:
        raise ValueError(f"normalize=True needs a batch of at least 2 samples, got {B}")
    m = B - 1 if normalize else 1
    if lam_mode == "relative":
        lam = float((G * G).sum().item() * rho / (B * m))
        if lam == 0.0:
            return torch.zeros(B, dtype=torch.float64, device=G.device)
    if P > dense_max_params and P > B:
        _, R = torch.linalg.qr(G.T, mode="reduced")
        G = R.T  # coordinates c_k of g_k in the orthonormal basis Q
        P = G.shape[1]
    eye = torch.eye(P, dtype=torch.float64, device=G.device)
    out = torch.empty(B, dtype=torch.float64, device=G.device)
    for j in range(B):
        others = torch.cat([G[:j], G[j + 1 :]])
        S = others.T @ others / m + lam * eye
        L = torch.linalg.cholesky(S)
        g = G[j].unsqueeze(1)
        out[j] = (g * torch.cholesky_solve(g, L)).sum()
    return out


def naive_gnq_scores(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    loss_fn: LossFn,
    lam: float = DEFAULT_LAM,
    lam_mode: str = "absolute",
    rho: float = DEFAULT_RHO,
    normalize: bool = False,
    dense_max_params: int = DENSE_MAX_PARAMS,
) -> torch.Tensor:
    """``gnq_scores(method="naive")``: per-sample gradients, then the definition."""
    G = per_sample_gradients(model, inputs, targets, loss_fn)
    return naive_gnq_from_gradients(G, lam, lam_mode, rho, normalize, dense_max_params)
