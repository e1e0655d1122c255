"""What the malicious server reads from the imprint block's part of an update, and how much
it can expect to read (:mod:`attacks.imprint.block` for the block and the derivation)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["expected_recovery_rate", "recover_images", "strongest_candidates"]


def recover_images(weight_update: ArrayLike, bias_update: ArrayLike,
                   input_shape: tuple[int, ...], *, rtol: float = 1e-6
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The inputs separated by the block's bins, from its first layer's update (or gradient:
    the sign and scale cancel) ``weight_update`` (k, d) and ``bias_update`` (k,):

        x_i = (dW_i - dW_{i+1}) / (db_i - db_{i+1}),   dW_{k+1} = 0, db_{k+1} = 0,

    for every bin i whose bias difference is not zero (|db_i - db_{i+1}| > ``rtol`` times
    the largest one: bins no sample reached carry only rounding).  A bin reached by one
    sample gives that sample exactly; one reached by several gives a weighted mean of them
    (a candidate that is none of them: the metrics tell).  Returns (candidates (n, *shape),
    the bins they came from (n,)), in bin order."""
    w = np.asarray(weight_update, dtype=np.float64)
    b = np.asarray(bias_update, dtype=np.float64)
    if w.ndim != 2 or b.shape != (w.shape[0],):
        raise ValueError(f"weight_update must be (k, d) and bias_update (k,); got {w.shape} "
                         f"and {b.shape}")
    d = int(np.prod(input_shape))
    if w.shape[1] != d:
        raise ValueError(f"weight_update has {w.shape[1]} columns; input_shape {input_shape} "
                         f"has {d} values")
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
        raise ValueError("the update holds non-finite values")
    dw = w - np.vstack([w[1:], np.zeros((1, d))])
    db = b - np.append(b[1:], 0.0)
    scale = np.abs(db).max() if len(db) else 0.0
    used = np.flatnonzero(np.abs(db) > rtol * scale) if scale > 0 else np.zeros(0, int)
    images = (dw[used] / db[used, None]).reshape((len(used), *input_shape))
    return images, used


def strongest_candidates(images: np.ndarray, bins: np.ndarray, bias_update: ArrayLike,
                         n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`recover_images`' candidates cut to the ``n`` of largest |db_i - db_{i+1}| (the
    bins most samples' weight reached; for when more bins changed than the round had
    samples), still in bin order; all of them when there are at most ``n``."""
    if len(bins) <= n:
        return images, bins
    b = np.asarray(bias_update, dtype=np.float64)
    strength = np.abs(np.diff(np.append(b, 0.0)))[bins]
    keep = np.sort(np.argsort(-strength)[:n])
    return images[keep], bins[keep]


def expected_recovery_rate(num_samples: int, bins: int) -> float:
    """The expected share of a round's N samples the block separates when the measurement
    follows the Gaussian the thresholds were fitted to: the k + 1 intervals are equally
    likely, the lowest reaches no bin, and a sample is recovered when it lies in one of the
    k others with none of the other N - 1 samples:

        E[share] = k / (k + 1) * (1 - 1 / (k + 1))^(N - 1) = (k / (k + 1))^N.

    (Fowl et al. 2022 give the expected number of separated samples for equal-mass bins; with
    k + 1 intervals of mass 1 / (k + 1) it is this expression times N.)"""
    for name, v in (("num_samples", num_samples), ("bins", bins)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} = {v!r}: must be an integer >= 1")
    return float((bins / (bins + 1)) ** num_samples)
