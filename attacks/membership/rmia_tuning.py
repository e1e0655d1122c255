"""RMIA's offline coefficient ``a`` tuned on the reference models (Zarifzadeh et al.,
ICML 2024, section 4: ``a`` "can be tuned by attacking a reference model with the
others"; ML Privacy Meter's ``tune_offline_a``), used by ``attack.rmia.a = "auto"``."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fedaudit.metrics import membership_metrics

__all__ = ["A_GRID", "tune_offline_a"]


#: RMIA's grid for ``a = "auto"`` (Privacy Meter's ``np.arange(0, 1.1, 0.1)``)
A_GRID = tuple(round(0.1 * i, 1) for i in range(11))


def tune_offline_a(paired_px: ArrayLike, reference_px: ArrayLike, paired_in: ArrayLike,
                   reference_in: ArrayLike, grid: tuple[float, ...] = A_GRID
                   ) -> tuple[float, dict[float, float]]:
    """RMIA's offline ``a`` chosen by attacking a reference with the others (Privacy
    Meter's ``tune_offline_a``): for each ``a`` on ``grid``, score the *paired* reference's
    tuning samples by ``p_paired(x) / p(x)``, ``p(x) = ((1 + a)/2) mean_OUT(x) + (1 - a)/2``
    with ``mean_OUT`` over the other references that did not train on x, and keep the
    ``a`` of the highest AUC against the paired reference's membership (the first on a
    tie, as Privacy Meter's strict ``>``).  Samples no other reference left OUT are
    dropped.  Unlike Privacy Meter, which uses one OUT model per sample here, the mean runs
    over every OUT reference, as the attack's own ``p(x)`` does.

    Parameters
    ----------
    paired_px : (T,) the paired reference's true-label probabilities.
    reference_px : (R, T) the other references'.
    paired_in : (T,) bool, the paired reference's membership (both classes needed).
    reference_in : (R, T) bool, the other references'.

    Returns ``(a, {a: AUC})``.
    """
    px = np.asarray(paired_px, dtype=np.float64)
    rx = np.asarray(reference_px, dtype=np.float64)
    member = np.asarray(paired_in)
    out = ~np.asarray(reference_in, dtype=bool)
    if px.ndim != 1 or rx.shape != (rx.shape[0], px.shape[0]) or out.shape != rx.shape \
            or member.shape != px.shape:
        raise ValueError(f"paired_px (T,), reference_px (R, T), paired_in (T,) and "
                         f"reference_in (R, T) must agree; got {px.shape}, {rx.shape}, "
                         f"{member.shape}, {out.shape}")
    keep = out.any(axis=0)
    if np.unique(member[keep]).size != 2:
        raise ValueError("tuning samples need members and non-members of the paired "
                         "reference that another reference left out")
    count = out[:, keep].sum(axis=0)
    mean_out = np.where(out[:, keep], rx[:, keep], 0.0).sum(axis=0) / count
    aucs = {}
    for a in grid:
        ratio = px[keep] / np.maximum((1.0 + a) / 2.0 * mean_out + (1.0 - a) / 2.0, 1e-30)
        aucs[a] = float(membership_metrics(ratio, member[keep].astype(np.int8))["auc"])
    return max(grid, key=aucs.__getitem__), aucs  # max keeps the first of equal AUCs
