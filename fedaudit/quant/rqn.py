"""The r_Qn membership-inference-security indicator of post-training quantized models.

Aubinais, Formont, Piantanida, Gassiat, "An Indicator of Membership Inference Security in
Post-Training Quantized Models" (arXiv 2502.06567, AISTATS 2026); docs/algorithms.md section 2.

Let th_1, th_2, ... be the distinct quantized configurations reachable by a quantizer,
ordered by expected loss. The indicator is

    r_Qn = 1/2 * min_{k>1} (E_z[l(th_k, z)] - E_z[l(th_1, z)])^2 / Var_z(l(th_k, z) - l(th_1, z)).

Larger r = more secure: the membership-inference security (MIS) of the quantized model
tends to 1 roughly like exp(-n r) in the training-set size n. Estimation (the testbed's,
following the paper's recipe of several training runs and their lowest-loss configurations):
per run, the candidates are the quantized global checkpoints Q(w_t) of the training
trajectory, duplicates dropped (:func:`distinct_candidates`), per-sample losses on held-out
data, the ``keep_lowest`` candidates of lowest mean loss (:func:`lowest_loss_rows`), then
:func:`rqn` on that (candidates x samples) loss matrix; over runs, :func:`rqn_over_runs`
gives the median and the spread.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["RqnResult", "RqnRuns", "distinct_candidates", "lowest_loss_rows", "rqn",
           "rqn_details", "rqn_over_runs"]

NOTE_SINGLE = "only 1 distinct quantized candidate"
NOTE_ZERO_VAR = "zero variance of loss differences"


@dataclass(frozen=True)
class RqnResult:
    """Outcome of :func:`rqn_details`.

    Attributes:
        r: the estimated r_Qn, in ``[0, inf]``, never NaN. Larger = more secure
            (MIS -> 1 roughly like exp(-n r)).
        n_candidates: number of rows given.
        n_distinct: number of distinct rows (identical loss rows counted once).
        best: row index of th_1, the distinct candidate of lowest mean loss.
        argmin: row index (into the rows given) of the th_k attaining the minimum, or
            None when ``r`` is infinite.
        note: why ``r`` is infinite, None when it is finite.
    """

    r: float
    n_candidates: int
    n_distinct: int
    best: int
    argmin: int | None
    note: str | None


def _as_loss_matrix(losses: Any) -> np.ndarray:
    if isinstance(losses, torch.Tensor):
        losses = losses.detach().cpu().numpy()
    try:
        arr = np.asarray(losses)
    except ValueError as err:  # ragged nested lists
        raise ValueError(f"losses must be a rectangular 2-D array-like: {err}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"losses must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"losses must be 2-D (candidates x samples), got shape {arr.shape}")
    n_cand, n_samp = arr.shape
    if n_cand < 1:
        raise ValueError(f"losses must have at least 1 candidate row, got shape {arr.shape}")
    if n_samp < 2:
        raise ValueError(
            f"losses must have at least 2 samples (columns) for an unbiased variance, got shape {arr.shape}"
        )
    arr = arr.astype(np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise ValueError(
            f"losses must be finite: {int((~finite).sum())} non-finite value(s), "
            f"first at candidate {row}, sample {col} ({arr[row, col]})"
        )
    # +0.0 maps -0.0 to +0.0 so that rows equal as numbers are equal as bytes.
    return arr + 0.0


def _first_distinct_rows(arr: np.ndarray) -> list[int]:
    seen: dict[bytes, int] = {}
    for i, row in enumerate(arr):
        seen.setdefault(row.tobytes(), i)
    return sorted(seen.values())


def _ratio(l_k: np.ndarray, l_1: np.ndarray) -> float:
    """mean(d)^2 / (2 var(d)) for d = l_k - l_1, var with ddof=1; ``inf`` when d is
    constant (var = 0; then d != 0, as the rows are distinct and a - b == 0 iff a == b).

    r is invariant to rescaling d: d is divided by max|d| so no square can overflow, and a
    constant d is detected exactly rather than through a rounded variance.
    """
    d = l_k - l_1
    if np.all(d == d[0]):
        return math.inf
    d = d / np.max(np.abs(d))
    var = float(np.var(d, ddof=1))
    if var <= 0.0:
        return math.inf
    return float(np.mean(d)) ** 2 / (2.0 * var)


def rqn_details(losses: Any) -> RqnResult:
    """r_Qn estimate from per-sample losses, with the bookkeeping behind it.

    Args:
        losses: (candidates x samples) array-like (NumPy, nested lists, torch tensor) of
            per-sample losses l(th_k, z_i) of each quantized candidate on the same samples.

    Steps: drop duplicate candidates (rows identical value by value; the first occurrence
    is kept); th_1 = the distinct candidate of lowest mean loss (the first one on ties);
    for every other distinct candidate k, d = l_k - l_1 per sample and

        r_k = mean(d)^2 / (2 var(d)),  var with ddof=1 (unbiased);

    r = min_k r_k (Aubinais et al., arXiv 2502.06567). Larger r = more secure
    (MIS -> 1 roughly like exp(-n r)).

    Infinite cases (never NaN):
      * fewer than two distinct candidates: r = inf, note ``"only 1 distinct quantized
        candidate"``;
      * a candidate whose d is constant (var(d) = 0; mean(d) != 0 since rows are
        distinct) is perfectly separated from th_1 by a constant shift and has r_k = inf.
        It never attains the minimum while another r_k is finite; if all r_k are inf,
        r = inf with note ``"zero variance of loss differences"``.
    ``argmin`` is None exactly when r is infinite; if several r_k attain the minimum, it
    is the one of lowest mean loss.

    Raises:
        ValueError: not 2-D, no candidate row, fewer than 2 samples, non-real dtype, or a
            non-finite value (the message gives its position).
    """
    arr = _as_loss_matrix(losses)
    n_candidates = arr.shape[0]
    rows = _first_distinct_rows(arr)
    if np.max(np.abs(arr)) > 2.0**512:
        # Exact power-of-two rescaling (r is scale-invariant) so that row sums and
        # differences of huge losses cannot overflow.
        arr = np.ldexp(arr, -512)
    means = arr[rows].mean(axis=1)
    order = np.argsort(means, kind="stable")
    best = rows[int(order[0])]
    if len(rows) < 2:
        return RqnResult(math.inf, n_candidates, len(rows), best, None, NOTE_SINGLE)

    r, argmin = math.inf, None
    for pos in order[1:]:
        k = rows[int(pos)]
        r_k = _ratio(arr[k], arr[best])
        if r_k < r:
            r, argmin = r_k, k
    note = NOTE_ZERO_VAR if argmin is None else None
    return RqnResult(r, n_candidates, len(rows), best, argmin, note)


def rqn(losses: Any) -> float:
    """The r_Qn indicator of a (candidates x samples) loss matrix; see :func:`rqn_details`.

    Larger = more secure (MIS -> 1 roughly like exp(-n r)); ``math.inf`` when fewer than
    two distinct candidates or the loss differences have zero variance; never NaN.
    """
    return rqn_details(losses).r


def lowest_loss_rows(losses: Any, keep: int) -> np.ndarray:
    """Row indices of the ``keep`` distinct candidates of lowest mean loss, in row order.

    Duplicate rows count once (the first occurrence is kept, as in :func:`rqn_details`);
    ties in the mean are broken by row order. ``keep = 0`` keeps every distinct row. This is
    the paper's restriction of the candidates to the low-loss configurations (early,
    high-loss checkpoints of a trajectory are not configurations a release could be).

    Raises:
        ValueError: ``keep`` is negative or not an integer, or ``losses`` is invalid as in
            :func:`rqn_details`.
    """
    _check_keep(keep)
    return _lowest_rows(_as_loss_matrix(losses), keep)


def _check_keep(keep: Any) -> None:
    if isinstance(keep, bool) or not isinstance(keep, (int, np.integer)) or keep < 0:
        raise ValueError(f"keep must be an integer >= 0 (0 = every distinct row), got {keep!r}")


def _lowest_rows(arr: np.ndarray, keep: int) -> np.ndarray:
    """:func:`lowest_loss_rows` on an already validated loss matrix."""
    rows = np.asarray(_first_distinct_rows(arr))
    if keep == 0 or keep >= len(rows):
        return rows
    means = arr[rows].mean(axis=1)
    chosen = np.argsort(means, kind="stable")[:keep]
    return np.sort(rows[chosen])


@dataclass(frozen=True)
class RqnRuns:
    """r_Qn estimated in each of several independent training runs (:func:`rqn_over_runs`).

    Attributes:
        runs: each run's :class:`RqnResult` (row indices refer to that run's kept rows).
        kept: each run's kept row indices (:func:`lowest_loss_rows`) into its loss matrix.
    """

    runs: tuple[RqnResult, ...]
    kept: tuple[tuple[int, ...], ...]

    @property
    def values(self) -> np.ndarray:
        """Each run's r (``inf`` possible, never NaN)."""
        return np.array([res.r for res in self.runs], dtype=np.float64)

    @property
    def median(self) -> float:
        """Median of the runs' r (an infinite r sorts last; with an even count the mean of
        the two middle values, ``inf`` if either is)."""
        return float(np.median(self.values))

    def quantile(self, q: float) -> float:
        """The q-quantile of the runs' r ("lower" interpolation: always one run's value, so
        infinite values never produce NaN)."""
        return float(np.quantile(self.values, q, method="lower"))


def rqn_over_runs(losses_per_run: Iterable[Any], keep_lowest: int = 0) -> RqnRuns:
    """r_Qn of each run: :func:`rqn_details` on the rows :func:`lowest_loss_rows` keeps.

    Args:
        losses_per_run: one (candidates x samples) loss matrix per independent run (the
            paper estimates r from about 15 runs); the matrices may differ in their number
            of candidates and samples.
        keep_lowest: candidates kept per run (0 = every distinct candidate).

    Raises:
        ValueError: no run, or a run's matrix is invalid (the message gives its index).
    """
    _check_keep(keep_lowest)
    runs, kept = [], []
    for i, losses in enumerate(losses_per_run):
        try:
            arr = _as_loss_matrix(losses)
            rows = _lowest_rows(arr, keep_lowest)
        except ValueError as err:
            raise ValueError(f"run {i}: {err}") from None
        runs.append(rqn_details(arr[rows]))
        kept.append(tuple(int(r) for r in rows))
    if not runs:
        raise ValueError("losses_per_run is empty: at least one run is needed")
    return RqnRuns(tuple(runs), tuple(kept))


def distinct_candidates(state_dicts: Iterable[Mapping[str, torch.Tensor]]) -> list[int]:
    """Indices of the first occurrence of each distinct state_dict, in input order.

    Two state_dicts are equal when they have the same keys and, key by key, tensors of the
    same dtype, shape and values. Equality is tested on a BLAKE2b-256 digest of the bytes
    (collisions are negligible), after mapping -0.0 to +0.0 so that numerically equal
    tensors compare equal (NaNs compare by bit pattern). ``state_dicts`` may be any
    iterable, e.g. a generator that loads and quantizes one checkpoint at a time: only the
    digests are kept.

    Raises:
        TypeError: an element is not a mapping, or holds a non-tensor value.
    """
    seen: set[bytes] = set()
    first: list[int] = []
    for i, sd in enumerate(state_dicts):
        digest = _state_dict_digest(sd, i)
        if digest not in seen:
            seen.add(digest)
            first.append(i)
    return first


def _state_dict_digest(sd: Mapping[str, torch.Tensor], index: int) -> bytes:
    if not isinstance(sd, Mapping):
        raise TypeError(f"state_dicts[{index}] must be a mapping of str to Tensor, got {type(sd).__name__}")
    h = hashlib.blake2b(digest_size=32)
    for key in sorted(sd):
        t = sd[key]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"state_dicts[{index}][{key!r}] must be a torch.Tensor, got {type(t).__name__}")
        t = t.detach()
        if t.is_floating_point():
            t = t + 0.0
        header = repr((key, str(t.dtype), tuple(t.shape))).encode()
        h.update(len(header).to_bytes(8, "little"))
        h.update(header)
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.digest()
