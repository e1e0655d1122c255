"""The arithmetic the ghost kernels share (the formulas are in :mod:`fedaudit.gnq.kernels`).

* :func:`gram`: X X^T of the rows of X, accumulated in float64, for every kernel;
* :func:`_weight_gram`: the exact Gram of a weight applied at T positions (and in g
  groups) by the cheaper of its two forms, the T^2 ghost form or the materialised
  per-sample gradients and their Gram;
* :func:`_use_ghost`: which form, by arithmetic with a memory cap (Li et al. 2021, arXiv
  2110.05679, choose by memory; the function says why we do not);
* :class:`Rows` and :class:`GramAccumulator`: a kernel may hand back per-sample rows X
  instead of their Gram, and the auditor adds X X^T of all layers' rows to K in one
  float64 product.
"""

from __future__ import annotations

from typing import NamedTuple, Union

import torch

__all__ = ["GramAccumulator", "Rows", "gram"]


class Rows(NamedTuple):
    """A kernel's contribution given as per-sample rows X (B, n): it adds X X^T to K."""

    X: torch.Tensor


#: what a kernel returns: (B x B) contributions and/or row blocks (None: nothing trainable)
Contribution = Union[torch.Tensor, Rows, "list[torch.Tensor | Rows]", None]

# Columns of the float64 row buffer of GramAccumulator (4 MiB at batch 16, 8 MiB at 32).
_ACC_COLS = 1 << 15


class GramAccumulator:
    """K = sum of (B x B) contributions + sum over row blocks X of X X^T, in float64.

    Row blocks (per-sample gradients of all layers, in the model's dtype) are converted
    into one float64 buffer, the conversion :func:`gram` makes anyway, and multiplied
    when the buffer is full or K is asked for: one product over the columns of many
    layers instead of one small product per layer, the buffer reused from step to step.
    The same float64 products as :func:`gram`, summed in another order (float64
    rounding, about 1e-16 of K).
    """

    def __init__(self, cols: int = _ACC_COLS) -> None:
        self._cols = cols
        self._buf: torch.Tensor | None = None
        self._used = 0
        self._K: torch.Tensor | None = None

    def reset(self) -> None:
        self._used = 0
        self._K = None

    @property
    def empty(self) -> bool:
        return self._K is None and self._used == 0

    def add(self, part: Contribution) -> None:
        if part is None:
            return
        if isinstance(part, list):
            for p in part:
                self.add(p)
        elif isinstance(part, Rows):
            self._add_rows(part.X)
        elif self._K is None:  # kernels return fresh tensors
            self._K = part.to(torch.float64)
        else:
            self._K.add_(part.to(torch.float64))

    def _add_rows(self, X: torch.Tensor) -> None:
        B, n = X.shape
        buf = self._buf
        if buf is None or buf.shape[0] != B or buf.device != X.device:
            if self._used:
                self._flush()
            buf = self._buf = torch.empty(B, self._cols, dtype=torch.float64, device=X.device)
        for j in range(0, n, self._cols):
            x = X[:, j : j + self._cols]
            w = x.shape[1]
            if self._used + w > self._cols:
                self._flush()
            buf[:, self._used : self._used + w].copy_(x)
            self._used += w

    def _flush(self) -> None:
        x = self._buf[:, : self._used]
        if self._K is None:
            self._K = x @ x.T
        else:
            self._K.addmm_(x, x.T)
        self._used = 0

    def result(self) -> torch.Tensor | None:
        """K (float64, B x B), or None when nothing was added."""
        if self._used:
            self._flush()
        return self._K

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


def _weight_gram(A: torch.Tensor, Bm: torch.Tensor, strategy: str) -> torch.Tensor | list[Rows]:
    """Exact Gram of per-sample gradients of a weight shared over positions and groups.

    A: (g, B, T, d) inputs, Bm: (g, B, T, p) output gradients; group k's per-sample
    gradient is sum_t Bm[k, i, t]^T A[k, i, t] (p x d). Returns (B x B), or the per-sample
    gradients as one :class:`Rows` block per group.
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
    # (g, B, p, d) per-sample gradients, one row block per group.
    Gw = torch.matmul(Bm.transpose(-1, -2), A).reshape(g, B, p * d)
    return [Rows(Gw[k]) for k in range(g)]


def _bias_gram(b_sum: torch.Tensor) -> Rows:
    return Rows(b_sum)
