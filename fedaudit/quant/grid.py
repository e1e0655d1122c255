"""Per-output-channel grid helpers shared by the quantizers: rows, safe scales, rounding.

A weight of any shape is viewed as ``(C, n) = (W.shape[0], W[0].numel())`` rows in
float64 (one row, and one scale, per output channel); the grid comes from the reference's
rows (the weight's own without a reference, see :mod:`fedaudit.quant.quantizers`), and
the dequantized rows go back to the weight's shape and dtype.
"""

from __future__ import annotations

import torch


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """``(C, n)`` float64 copy of the weight: one row per output channel."""
    return weight.detach().to(torch.float64).reshape(weight.shape[0], -1)


def _safe(scale: torch.Tensor) -> torch.Tensor:
    # An all-zero channel has scale 0; dividing by 1 instead keeps it exactly zero.
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def _round(x: torch.Tensor) -> torch.Tensor:
    # torch.round is round-half-to-even; "+ 0.0" turns -0.0 into +0.0 so that identical
    # quantized models are byte-identical (see distinct_candidates).
    return torch.round(x) + 0.0


def _restore(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    # "+ 0.0": a code -1 on a zero scale (all-zero reference channel) would give -0.0.
    return values.reshape(like.shape).to(dtype=like.dtype) + 0.0


def _grid_rows(weight: torch.Tensor, x: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    """Rows ``(C, n)`` of the tensor that defines the grid: ``x`` (the rows of ``weight``)
    when there is no reference or it is ``weight`` itself, else the reference's rows."""
    return x if reference is None or reference is weight else _rows(reference)
