"""The absmean-scaled quantizers: ternary (BitNet b1.58), ternary-sparseXX and binary.

Per output channel c, with R the reference (the weight itself without one) and
s_c = mean|R_c|:

* ``ternary``: Q(W) = clip(round(W / s_c), -1, 1) * s_c (Ma et al. 2024, arXiv 2402.17764);
* ``ternary-sparseXX``: magnitude pruning of XX% of each channel (the mask from W's own
  magnitudes), then ternarisation of the kept entries on s_c = mean|R| over the entries
  the REFERENCE keeps under the same pruning rule; every XX in 1..99 resolves by pattern
  (a family of :data:`~fedaudit.quant.QUANTIZERS`), 50 and 90 are registered;
* ``binary``: sign(W) * s_c.

docs/algorithms.md section 2; the contract of a quantizer is in
:mod:`fedaudit.quant.registry`.
"""

from __future__ import annotations

import functools
import math
import re

import torch

from fedaudit.quant.grid import _grid_rows, _restore, _round, _rows, _safe
from fedaudit.quant.registry import QUANTIZERS, QuantizerSpec, register_quantizer
from fedaudit.registry import Entry

__all__ = ["TERNARY_BITS", "binary", "ternary", "ternary_sparse50", "ternary_sparse90"]

# log2(3) = 1.58496...: the information content of a ternary weight, rounded as in
# "BitNet b1.58".
TERNARY_BITS = round(math.log2(3), 2)

_SPARSE_RE = re.compile(r"ternary-sparse([1-9][0-9]?)")


def _absmean(r: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Per-row mean |r| over the kept entries (``keep`` None = all), shape ``(C, 1)``."""
    if keep is None:
        return r.abs().mean(dim=1, keepdim=True)
    kept_abs = torch.where(keep, r.abs(), 0.0)
    return kept_abs.sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True)


def _ternarize(x: torch.Tensor, scale: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """BitNet b1.58 absmean ternarisation of the rows of ``x`` (float64, ``(C, n)``) on the
    per-row scale ``scale`` (``(C, 1)``; s_c = mean|W_c| over the kept entries for the
    own grid, see :func:`_absmean`):  Q(W) = clip(round(W / s_c), -1, 1) * s_c.
    ``keep`` (bool, same shape as ``x``; None = all) marks the entries that survived
    pruning; the others are 0.
    """
    q = torch.clamp(_round(x / _safe(scale)), -1, 1)
    if keep is not None:
        q = torch.where(keep, q, 0.0)  # not q * keep: -1 * 0 would give -0.0
    return q * scale


def _prune_mask(x: torch.Tensor, percent: int) -> torch.Tensor:
    """Keep-mask of the magnitude pruning of ``percent``% per row of ``x`` (``(C, n)``):
    exactly k = floor(percent * n / 100) entries of smallest |x| are dropped, ties broken
    by position (earlier first, stable sort)."""
    n = x.shape[1]
    k = percent * n // 100  # integer arithmetic: 0.29 * 100 would floor to 28
    order = torch.argsort(x.abs(), dim=1, stable=True)
    keep = torch.ones_like(x, dtype=torch.bool)
    keep.scatter_(1, order[:, :k], False)
    return keep


def _ternary_sparse(weight: torch.Tensor, reference: torch.Tensor | None, percent: int) -> torch.Tensor:
    """Magnitude pruning of ``percent``% per output channel, then ternarisation.

    In each channel of n entries exactly k = floor(percent * n / 100) entries of smallest
    |W| are zeroed. Ties in |W| are broken by position: among equal magnitudes the entry
    earlier in row-major order of the channel is pruned first (stable sort), so the
    pruned count is exactly k. The n - k kept entries are ternarised with the scale
    s_c = mean|W| over the kept entries only; a kept entry with |W| < s_c / 2 rounds to 0
    and stays 0 (plain round-to-nearest, not forced to +-s_c), so the realised sparsity
    is at least the nominal one.

    With a reference R (not None and not ``weight`` itself) the mask still comes from
    W's own magnitudes, but s_c = mean|R| over the entries that R keeps under the same
    pruning rule, so the grid {-s_c, 0, s_c} is fixed by R.
    """
    x = _rows(weight)
    keep = _prune_mask(x, percent)
    r = _grid_rows(weight, x, reference)
    scale = _absmean(r, keep if r is x else _prune_mask(r, percent))
    return _restore(_ternarize(x, scale, keep), weight)


@functools.lru_cache(maxsize=None)
def _ternary_sparse_spec(percent: int) -> QuantizerSpec:
    if not 1 <= percent <= 99:
        raise ValueError(f"ternary-sparse percent must be an integer in 1..99, got {percent}")
    name = f"ternary-sparse{percent}"
    if name in QUANTIZERS:
        return QUANTIZERS[name]
    fn = functools.partial(_ternary_sparse, percent=percent)  # fn(weight, reference)
    return QuantizerSpec(name=name, fn=fn, bits=TERNARY_BITS, sparsity=percent / 100)


def _sparse_entry(match) -> Entry:
    spec = _ternary_sparse_spec(int(match.group(1)))
    return Entry(spec.name, spec, {"bits": spec.bits, "sparsity": spec.sparsity})


QUANTIZERS.add_family(_SPARSE_RE.pattern, _sparse_entry,
                      "ternary-sparseXX (XX an integer in 1..99)")


@register_quantizer("ternary", bits=TERNARY_BITS)
def ternary(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """1.58-bit ternary (BitNet b1.58): clip(round(W / s_c), -1, 1) * s_c, s_c = mean|R_c|."""
    x = _rows(weight)
    return _restore(_ternarize(x, _absmean(_grid_rows(weight, x, reference))), weight)


@register_quantizer("ternary-sparse50", bits=TERNARY_BITS, sparsity=0.5)
def ternary_sparse50(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Prune the 50% smallest |W| per channel, then ternarise (see ``_ternary_sparse``)."""
    return _ternary_sparse(weight, reference, 50)


@register_quantizer("ternary-sparse90", bits=TERNARY_BITS, sparsity=0.9)
def ternary_sparse90(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Prune the 90% smallest |W| per channel, then ternarise (see ``_ternary_sparse``)."""
    return _ternary_sparse(weight, reference, 90)


@register_quantizer("binary", bits=1)
def binary(weight: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """1-bit: sign(W) * mean|R_c|, with sign(0) taken as +1.

    A channel with entries of both signs has exactly the two levels +-mean|R_c|; a channel
    whose grid channel R_c is all zero gives 0 (its scale is 0).
    """
    x = _rows(weight)
    scale = _absmean(_grid_rows(weight, x, reference))
    sign = torch.where(x >= 0, 1.0, -1.0).to(x.dtype)
    return _restore(sign * scale, weight)


QUANTIZERS.mark_builtin()
