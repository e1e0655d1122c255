"""The arithmetic the ghost kernels share (the formulas are in :mod:`fedaudit.gnq.kernels`).

* :func:`gram`: X X^T of the rows of X, accumulated in float64, for every kernel;
* :func:`_weight_gram`: the exact Gram of a weight applied at T positions (and in g
  groups) by the cheaper of its two forms, the T^2 ghost form or the materialised
  per-sample gradients and their Gram;
* :func:`_use_ghost`: which form, by arithmetic with a memory cap (Li et al. 2021, arXiv
  2110.05679, choose by memory; the function says why we do not).
"""

from __future__ import annotations

import torch

__all__ = ["gram"]

# Cap on the elements of one (rows x B*T) block of the ghost form, to bound memory.
_GHOST_BLOCK_ELEMS = 1 << 24


def _trainable(p: torch.Tensor | None) -> bool:
    return p is not None and p.requires_grad


# Largest per-sample gradient block (elements) the "auto" rule will materialise for one
# layer: 2^26 float32 = 256 MiB.
_MATERIALIZE_MAX_ELEMS = 1 << 26


def _use_ghost(T: int, p: int, d: int, strategy: str, B: int = 1, g: int = 1) -> bool:
    """Pick the cheaper exact form for a layer with T positions, p x d weight (per group).

    The design note quoted Li et al.'s memory rule (ghost iff 2 T^2 < p d); we depart from it and
    compare arithmetic instead, because the memory rule sends layers such as ResNet-18's
    layer2 convolutions (T = 256, p d = 147k) to the ghost form at ~100x the FLOPs:
    ghost ~ g (B T)^2 (p + d), per-sample gradients + Gram ~ g B p d (T + B).  The
    per-sample form is only chosen while its block (g B p d elements) stays under
    ``_MATERIALIZE_MAX_ELEMS``, which keeps the memory bound the ghost form exists for.
    """
    if strategy == "ghost":
        return True
    if strategy == "materialize":
        return False
    if g * B * p * d > _MATERIALIZE_MAX_ELEMS:
        return True
    return B * T * T * (p + d) < p * d * (T + B)


# Columns of one float64 block in gram() (2 MiB at batch 32).
_GRAM_BLOCK_COLS = 1 << 13


def gram(X: torch.Tensor) -> torch.Tensor:
    """X X^T of a (B, n) matrix, accumulated in float64 (returns float64, B x B).

    A float32 X X^T errs by about eps32 * sqrt(n) * ||x_i|| ||x_j||.  GNQ lives in the
    small eigen-directions of K + lam I: on a batch of near-duplicates (clusters of rows
    x_i = c + d_i, ||d_i|| << ||c||) they are of size ||d||^2, so that error is amplified
    by ||c||^2 / ||d||^2 (3.5% GNQ error with near-duplicate inputs, noise 1e-3, on the
    quickstart CNN: experiments/gnq_precision.py).  Centring X on its mean before a
    float32 product does not help when the batch holds several clusters (still 1.6%);
    float64 accumulation does (3e-6).  Only this B^2 n product is float64: the rows
    themselves (activations, output gradients, per-sample gradients, whose computation is
    the B n T part of the cost) stay in X's dtype, accurate enough as
    tests/gnq/test_gnq_precision.py checks against the float64 reference.
    """
    if X.dtype == torch.float64:
        return X @ X.T
    n = X.shape[1]
    if n <= _GRAM_BLOCK_COLS or X.device.type != "cpu":
        X = X.to(torch.float64)
        return X @ X.T
    # On a CPU a wide X (ResNet-18's per-sample gradients: 32 x 590k) is converted block by
    # block: one float64 copy of the whole of it cost more than the product (page faults
    # on a fresh 150 MB buffer), a cache-sized block does not.
    K = torch.zeros(X.shape[0], X.shape[0], dtype=torch.float64, device=X.device)
    for j in range(0, n, _GRAM_BLOCK_COLS):
        x = X[:, j : j + _GRAM_BLOCK_COLS].to(torch.float64)
        K.addmm_(x, x.T)
    return K


def _weight_gram(A: torch.Tensor, Bm: torch.Tensor, strategy: str) -> torch.Tensor:
    """Exact Gram of per-sample gradients of a weight shared over positions and groups.

    A: (g, B, T, d) inputs, Bm: (g, B, T, p) output gradients; group k's per-sample
    gradient is sum_t Bm[k, i, t]^T A[k, i, t] (p x d). Returns (B x B).
    """
    g, B, T, d = A.shape
    p = Bm.shape[-1]
    if T == 1 and g == 1:
        return gram(A[0, :, 0]).mul_(gram(Bm[0, :, 0]))
    if _use_ghost(T, p, d, strategy, B, g):
        # float64 throughout: the centring of gram() has no analogue over position pairs
        A2 = A.reshape(g, B * T, d).to(torch.float64)
        B2 = Bm.reshape(g, B * T, p).to(torch.float64)
        out = torch.empty(B, B, dtype=torch.float64, device=A.device)
        rows = max(1, _GHOST_BLOCK_ELEMS // max(1, g * T * B * T))
        for i0 in range(0, B, rows):
            i1 = min(B, i0 + rows)
            ga = torch.bmm(A2[:, i0 * T : i1 * T], A2.transpose(1, 2))
            gb = torch.bmm(B2[:, i0 * T : i1 * T], B2.transpose(1, 2))
            out[i0:i1] = ga.mul_(gb).sum(0).view(i1 - i0, T, B, T).sum((1, 3))
        return out
    # (g, B, p, d) per-sample gradients, then per-group Grams summed.
    Gw = torch.matmul(Bm.transpose(-1, -2), A).reshape(g, B, p * d)
    K = gram(Gw[0])
    for k in range(1, g):
        K += gram(Gw[k])
    return K


def _bias_gram(b_sum: torch.Tensor) -> torch.Tensor:
    return gram(b_sum)
