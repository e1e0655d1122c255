"""Batch-space Gradient Uniqueness (GNQ) from a Gram matrix.

Gradient Uniqueness (Abdelghafar, Aliakbarpour, Jermaine, arXiv 2510.10902): for a batch
whose per-sample gradients g_1..g_B are the rows of G (B x P),

    GNQ_j = g_j^T S_j^{-1} g_j,   S_j = sum_{k != j} g_k g_k^T + lam I     (uncentred,
                                                                        unnormalised)

In batch space, with K = G G^T (B x B), the push-through identity and Sherman-Morrison
give

    h = diag((K + lam I)^{-1} K),   GNQ_j = h_j / (1 - h_j).

Everything here is solved in float64 with ``torch.linalg.solve`` (never an explicit
inverse). Options shared by every entry point:

* ``lam_mode="absolute"`` (default): lam is used as given (default 1e-2, as in the
  authors' reference code).
* ``lam_mode="relative"``: lam = rho * trace(K) / B, i.e. rho times the mean squared
  per-sample gradient norm, so scores do not change when the loss is rescaled. Default
  ``rho = 1e-2``: a sample whose gradient is orthogonal to all others and of average norm
  then scores about 1 / rho = 100, an exact duplicate of another sample scores below 1.
* ``normalize=True``: use the normalised covariance S_j = G_{-j}^T G_{-j} / m + lam I
  with m = B - 1, computed through the identity GNQ_norm(lam) = m * GNQ_unnorm(m * lam).
  In relative mode lam is then relative to that covariance: lam = rho * trace(K / m) / B.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal, Sequence

import numpy as np
import torch

__all__ = [
    "DEFAULT_LAM",
    "DEFAULT_RHO",
    "LAM_MODES",
    "gnq_from_gram",
    "gnq_from_gram_options",
    "gnq_of_updates",
    "resolve_lambda",
    "validate_options",
]

DEFAULT_LAM: float = 1e-2
DEFAULT_RHO: float = 1e-2
LAM_MODES: tuple[str, ...] = ("absolute", "relative")

LamMode = Literal["absolute", "relative"]


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive float, got {type(value).__name__} {value!r}")
    value = float(value)
    if not value > 0.0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def validate_options(lam: float, lam_mode: str, rho: float) -> tuple[float, str, float]:
    """Check ``lam``, ``lam_mode`` and ``rho``; return them as (float, str, float)."""
    if lam_mode not in LAM_MODES:
        raise ValueError(f"lam_mode must be one of {list(LAM_MODES)}, got {lam_mode!r}")
    return _check_positive("lam", lam), lam_mode, _check_positive("rho", rho)


def _as_gram(K: torch.Tensor) -> torch.Tensor:
    """Validate K and return it as a symmetrised float64 matrix."""
    if not isinstance(K, torch.Tensor):
        raise TypeError(f"K must be a torch.Tensor, got {type(K).__name__}")
    if K.dim() != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square (B x B) matrix, got shape {tuple(K.shape)}")
    if K.shape[0] == 0:
        raise ValueError("K is empty (batch of size 0)")
    if K.is_complex() or K.dtype == torch.bool:
        raise TypeError(f"K must be a real matrix, got dtype {K.dtype}")
    K = K.detach().to(torch.float64)
    # One host sync for both checks; amax propagates NaN.
    scale, asym = torch.stack((K.abs().amax(), (K - K.T).abs().amax())).tolist()
    if not math.isfinite(scale):
        raise ValueError("K contains NaN or infinite entries")
    # Grams accumulated in float32 are symmetric only up to rounding.
    if asym > 1e-6 * scale:
        raise ValueError(
            f"K must be symmetric (a Gram matrix G G^T); max |K - K^T| = {asym:.3g} "
            f"exceeds 1e-6 * max|K| = {1e-6 * scale:.3g}"
        )
    return (K + K.T).mul_(0.5)


def _gnq_checked(K: torch.Tensor, lam: float) -> torch.Tensor:
    # One solve gives both h = diag((K + lam I)^-1 K) and 1 - h = lam diag((K + lam I)^-1)
    # (as (K + lam I)^-1 K = I - lam (K + lam I)^-1), each where it is accurate: h for
    # ordinary samples, 1 - h without cancellation for the most unique ones (h -> 1), so
    # large scores are neither capped nor tied.  1 - h > 0 since K + lam I is SPD.
    B = K.shape[0]
    A = K.clone()
    A.diagonal().add_(lam)
    rhs = torch.cat((K, torch.eye(B, dtype=K.dtype, device=K.device)), dim=1)
    sol = torch.linalg.solve(A, rhs)
    h = sol[:, :B].diagonal().clamp_min(0.0)
    one_minus_h = sol[:, B:].diagonal() * lam
    return h / one_minus_h


def gnq_from_gram(K: torch.Tensor, lam: float) -> torch.Tensor:
    """GNQ of every row of G from its Gram matrix K = G G^T (arXiv 2510.10902).

    h = diag(solve(K + lam I, K)), 1 - h = lam diag(solve(K + lam I, I));
    GNQ_j = h_j / (1 - h_j), which equals g_j^T (sum_{k != j} g_k g_k^T + lam I)^{-1} g_j
    (push-through identity and Sherman-Morrison). Solved in float64 with torch.linalg.solve;
    1 - h is computed directly, so scores near 1/lam * ||g||^2 are not capped.

    Args:
        K: symmetric positive semi-definite (B x B) Gram matrix, any real dtype.
        lam: ridge lambda > 0 (absolute; see :func:`gnq_from_gram_options` for relative).

    Returns:
        float64 tensor (B,) on K's device.
    """
    lam = _check_positive("lam", lam)
    return _gnq_checked(_as_gram(K), lam)


def _gnq_from_trusted_gram(
    K: torch.Tensor, lam: float, lam_mode: str, rho: float, normalize: bool
) -> torch.Tensor:
    """Fast path for a Gram built by the auditor: symmetric up to rounding by
    construction, options already validated; NaN/inf is detected on the result."""
    K = K.to(torch.float64)
    K = (K + K.T).mul_(0.5)
    B = K.shape[0]
    if normalize and B < 2:
        raise ValueError(f"normalize=True needs a batch of at least 2 samples, got {B}")
    m = B - 1 if normalize else 1
    lam_eff = lam if lam_mode == "absolute" else rho * K.diagonal().sum().item() / (B * m)
    if lam_eff == 0.0:
        return torch.zeros(B, dtype=torch.float64, device=K.device)
    if not math.isfinite(lam_eff):
        raise ValueError("the Gram matrix contains NaN or infinite entries")
    scores = _gnq_checked(K, m * lam_eff)
    if not bool(torch.isfinite(scores).all()):
        raise ValueError("the Gram matrix contains NaN or infinite entries")
    return scores.mul_(m) if m != 1 else scores


def resolve_lambda(
    K: torch.Tensor, lam: float, lam_mode: str = "absolute", rho: float = DEFAULT_RHO, m: int = 1
) -> float:
    """The lambda actually used: ``lam`` (absolute) or rho * trace(K / m) / B (relative).

    ``m`` is the covariance normaliser (1 unnormalised, B - 1 with ``normalize=True``).
    Returns 0.0 in relative mode when trace(K) == 0 (every gradient is zero).
    """
    lam, lam_mode, rho = validate_options(lam, lam_mode, rho)
    if lam_mode == "absolute":
        return lam
    B = K.shape[0]
    return float(rho * torch.diagonal(K).sum().item() / (B * m))


def gnq_from_gram_options(
    K: torch.Tensor,
    lam: float = DEFAULT_LAM,
    lam_mode: str = "absolute",
    rho: float = DEFAULT_RHO,
    normalize: bool = False,
) -> torch.Tensor:
    """:func:`gnq_from_gram` with the lambda mode and normalisation options applied.

    GNQ_norm(lam) = m * GNQ_unnorm(m * lam) with m = B - 1 when ``normalize`` (m = 1
    otherwise), lam from :func:`resolve_lambda`.
    """
    K = _as_gram(K)
    B = K.shape[0]
    if normalize and B < 2:
        raise ValueError(f"normalize=True needs a batch of at least 2 samples, got {B}")
    m = B - 1 if normalize else 1
    lam_eff = resolve_lambda(K, lam, lam_mode, rho, m)
    if lam_eff == 0.0:
        # Only reachable in relative mode with all-zero gradients: GNQ -> 0 for any lam > 0.
        return torch.zeros(B, dtype=torch.float64, device=K.device)
    scores = _gnq_checked(K, m * lam_eff)
    return scores.mul_(m) if m != 1 else scores


_UPDATE_CHUNK = 1 << 20


def _update_rows(updates: object) -> list[torch.Tensor] | torch.Tensor:
    if isinstance(updates, torch.Tensor):
        if updates.dim() != 2 or updates.shape[0] == 0:
            raise ValueError(
                f"updates must be a (C x P) matrix with one client update per row, "
                f"got shape {tuple(updates.shape)}"
            )
        return updates.detach()
    if isinstance(updates, np.ndarray):
        if updates.ndim != 2 or updates.shape[0] == 0:
            raise ValueError(
                f"updates must be a (C x P) array with one client update per row, "
                f"got shape {updates.shape}"
            )
        return torch.from_numpy(np.ascontiguousarray(updates))
    if not isinstance(updates, (list, tuple)) or len(updates) == 0:
        raise TypeError(
            "updates must be a (C x P) tensor/ndarray or a non-empty list of flat "
            f"tensors/ndarrays, got {type(updates).__name__}"
        )
    rows: list[torch.Tensor] = []
    for i, u in enumerate(updates):
        if isinstance(u, np.ndarray):
            u = torch.from_numpy(np.ascontiguousarray(u))
        if not isinstance(u, torch.Tensor):
            raise TypeError(f"update {i} is a {type(u).__name__}, expected a tensor or ndarray")
        if u.dim() != 1:
            raise ValueError(
                f"update {i} has shape {tuple(u.shape)}; pass flat vectors, e.g. "
                "torch.cat([t.flatten() for t in tensors])"
            )
        if rows and u.numel() != rows[0].numel():
            raise ValueError(
                f"update {i} has {u.numel()} entries but update 0 has {rows[0].numel()}"
            )
        rows.append(u.detach())
    return rows


def gnq_of_updates(
    updates: torch.Tensor | np.ndarray | Sequence[torch.Tensor | np.ndarray],
    lam: float = DEFAULT_LAM,
    lam_mode: Literal["absolute", "relative"] = "absolute",
    rho: float = DEFAULT_RHO,
    normalize: bool = False,
) -> torch.Tensor:
    """Server-side GNQ of each client's update within one round (arXiv 2510.10902).

    The rows u_c = w_c - w_global (C x P) play the role of per-sample gradients:
    K = U U^T in float64 (accumulated over column chunks, so no float64 copy of U is
    made), h = diag((K + lam I)^{-1} K), GNQ_c = h_c / (1 - h_c). Flattening is exact
    here because each update is one whole vector.

    Args:
        updates: (C x P) tensor or ndarray, or a list of C flat tensors/ndarrays.
        lam, lam_mode, rho, normalize: as in :func:`gnq_from_gram_options`
            (relative: lam = rho * trace(K) / C, default rho = 1e-2).

    Returns:
        float64 tensor (C,), on the updates' device.
    """
    validate_options(lam, lam_mode, rho)
    rows = _update_rows(updates)
    if isinstance(rows, torch.Tensor):
        C, P = rows.shape
        device = rows.device

        def chunk(c0: int, c1: int) -> torch.Tensor:
            return rows[:, c0:c1].to(torch.float64)

    else:
        C, P = len(rows), rows[0].numel()
        device = rows[0].device

        def chunk(c0: int, c1: int) -> torch.Tensor:
            return torch.stack([r[c0:c1].to(device=device, dtype=torch.float64) for r in rows])

    if P == 0:
        raise ValueError("updates are empty vectors (P = 0)")
    K = torch.zeros(C, C, dtype=torch.float64, device=device)
    for c0 in range(0, P, _UPDATE_CHUNK):
        U = chunk(c0, min(P, c0 + _UPDATE_CHUNK))
        if not torch.isfinite(U).all():
            raise ValueError("updates contain NaN or infinite entries")
        K.addmm_(U, U.T)
    return gnq_from_gram_options(K, lam, lam_mode, rho, normalize)
