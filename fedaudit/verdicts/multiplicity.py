"""Holm's step-down correction for looking at several tests at once (Holm 1979, "A simple
sequentially rejective multiple test procedure", Scandinavian Journal of Statistics 6(2)):
with the p-values sorted, ``p_(1) <= ... <= p_(H)``, the adjusted p-values are

    p~_(i) = min(1, max_{j <= i} (H - j + 1) p_(j)),

and rejecting every test with ``p~ < alpha`` keeps the chance of any false rejection at
most ``alpha`` whatever the dependence between the tests.  The cell of a matrix that shows
the best of several attacks, or its most exposed client, is tested this way."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["holm"]


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's adjusted p-values of ``pvalues`` (module docstring), in their order; a None
    (no test) stays None and does not count among the H tests."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if not idx:
        return out
    p = np.array([float(pvalues[i]) for i in idx])
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        bad = next(v for v in p if not 0 <= v <= 1)
        raise ValueError(f"p-values must lie in [0, 1], got {bad!r}")
    h = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, np.maximum.accumulate((h - np.arange(h)) * p[order]))
    adjusted = np.empty(h)
    adjusted[order] = stepped
    for i, a in zip(idx, adjusted):
        out[i] = float(a)
    return out
