"""Membership-inference metrics (docs/algorithms.md section 5).

Pure functions in the style of ``sklearn.metrics``: they validate their input and return
plain Python numbers, so the results go straight into ``results.json``.

Conventions
-----------
* ``members`` holds the ground truth: 1 (or ``True``) for a member (a training sample),
  0 for a non-member. Members are the positive class.
* ``scores`` are oriented so that a higher score means "more likely a member".
* The ROC curve is scikit-learn's ``roc_curve(members, scores, drop_intermediate=False)``
  (computed here, see below): one point per distinct score threshold, starting at the
  origin (0, 0). Tied scores move together, so only those points are achievable by
  thresholding; we never interpolate between them (an interpolated point would need a
  randomised classifier).
* ``TPR at FPR <= b`` is the largest TPR over ROC points whose FPR does not exceed ``b``
  (0.0 if only the origin qualifies). ``FPR at TPR >= t`` is the smallest FPR over ROC
  points whose TPR reaches ``t`` (always defined: the curve ends at (1, 1)).
* With ``n`` non-members the smallest non-zero FPR is ``1/n``
  (``min_fpr_resolution``). When a bound is below it, the "TPR at FPR <= bound" is the
  TPR at FPR = 0; report the resolution next to it instead of pretending more precision.

The comparisons are exact: ``fpr = fp / n_neg`` and ``tpr = tp / n_pos`` are formed by
correctly rounded division of integer counts, so a ratio that equals a decimal bound
exactly (1/100 vs 0.01, 4/5 vs 0.8) compares equal, and rounding is monotone, so no
tolerance is needed.

Computation: numpy, mirroring scikit-learn 1.9.1 (``sklearn/metrics/_ranking.py``:
``confusion_matrix_at_thresholds``, ``roc_curve``, ``auc``) operation for operation, so
every value is bit-identical to ``roc_curve`` and ``roc_auc_score`` (which, for binary
labels, is ``auc(*roc_curve(y, s)[:2])``). ``tests/attacks/test_metrics.py`` holds them equal
(``==``, bitwise) on thousands of random cases, so a scikit-learn that rounds differently
is caught there. Why not call scikit-learn: its input validation (``type_of_target``,
``check_array``, parameter checks) cost 2.5-4 ms per call at n = 40 (still 2 ms under
``sklearn.config_context(skip_parameter_validation=True, assume_finite=True)``), against
0.05 ms of arithmetic, and a federated run calls this once per client, target and attack
(45,000 calls at 1,000 clients; ``bench/metrics.py`` measures both). The module therefore
never imports scikit-learn, which also spares each simulated client actor its 1 s import
(every client imports this module through the attack registry and never computes a metric).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedaudit.intervals import (LEVEL, chance_verdict, check_level, clopper_pearson,
                                normal_interval, threshold_verdict)

__all__ = [
    "MembershipMetrics",
    "auc_interval",
    "delong_placements",
    "membership_metrics",
    "roc_points",
    "tpr_at_fpr",
    "fpr_at_tpr",
]


def _validate(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Check and convert ``(scores, members)``; return float64 scores and int8 labels."""
    s = np.asarray(scores)
    m = np.asarray(members)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-D, got an array of shape {s.shape}")
    if m.ndim != 1:
        raise ValueError(f"members must be 1-D, got an array of shape {m.shape}")
    if s.shape[0] != m.shape[0]:
        raise ValueError(
            f"scores and members must have the same length, got {s.shape[0]} and {m.shape[0]}"
        )
    if s.dtype.kind not in "biuf":
        raise ValueError(f"scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64, copy=False)
    if not np.all(np.isfinite(s)):
        bad = np.flatnonzero(~np.isfinite(s))
        raise ValueError(
            f"scores must be finite; {bad.size} value(s) are NaN or infinite "
            f"(first at index {int(bad[0])}: {s[bad[0]]})"
        )
    if m.dtype.kind not in "biuf":
        raise ValueError(f"members must hold 0/1 (or booleans), got dtype {m.dtype}")
    if m.dtype.kind == "f" and not np.all(np.isfinite(m)):
        raise ValueError("members must hold only 0 and 1, found NaN or infinite values")
    values = np.unique(m)
    if not np.all(np.isin(values, (0, 1))):
        others = values[~np.isin(values, (0, 1))]
        raise ValueError(
            f"members must hold only 0 and 1 (or booleans), found {others[:5].tolist()}"
        )
    m = m.astype(np.int8)
    n_members = int(m.sum())
    if n_members == 0 or n_members == m.shape[0]:
        present = "members (1)" if n_members else "non-members (0)"
        raise ValueError(
            f"members must contain both classes (1 = member, 0 = non-member); "
            f"got only {present}, {m.shape[0]} sample(s)"
        )
    return s, m


def _check_rate(value: float, name: str) -> float:
    v = float(value)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return v


def _roc_counts(s: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative false / true positive counts ``(fps, tps)`` at each distinct threshold.

    ``confusion_matrix_at_thresholds`` of scikit-learn 1.9.1 plus ``roc_curve``'s origin:
    sort by decreasing score; ``tps[k]`` = members among the scores ``>=`` the k-th
    largest distinct score, ``fps[k]`` = the rest; ``(0, 0)`` first. The order within tied
    scores does not change a count at a threshold, hence a plain argsort, reversed.
    scikit-learn keeps the counts in float64; integers up to ``2**53`` are exact there,
    so its ratios and second differences equal ours.
    """
    order = np.argsort(s)[::-1]
    ends = np.flatnonzero(np.diff(s[order]))  # last index of each tied run but the final one
    idx = np.empty(ends.size + 1, dtype=np.intp)
    idx[:-1] = ends
    idx[-1] = s.size - 1
    tp = np.cumsum(m[order], dtype=np.int64)[idx]
    tps = np.zeros(idx.size + 1, dtype=np.int64)
    fps = np.zeros(idx.size + 1, dtype=np.int64)
    tps[1:] = tp
    fps[1:] = idx + 1 - tp
    return fps, tps


def _rates(fps: np.ndarray, tps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, tpr) = (fps / fps[-1], tps / tps[-1])`` in float64, as ``roc_curve``."""
    return fps / np.float64(fps[-1]), tps / np.float64(tps[-1])


def _auc(fps: np.ndarray, tps: np.ndarray, fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Trapezoidal area under the ROC curve, exactly as ``roc_auc_score`` (binary).

    scikit-learn 1.9.1 integrates ``roc_curve(..., drop_intermediate=True)``. That drops
    points from the thresholds' counts BEFORE it prepends the origin: of ``c = fps[1:]``
    (and ``tps[1:]``) it keeps both ends and every point where ``diff(c, 2)`` is non-zero
    (corners; a dropped point is collinear with its neighbours, so it changes the area
    only by rounding, and dropping exactly the same points keeps the rounding the same).
    Then ``auc`` = ``trapezoid(tpr, fpr)``: ``scipy.integrate.trapezoid`` (what
    scikit-learn calls), i.e. ``(diff(x) * (y[1:] + y[:-1]) / 2.0).sum()``, written out.
    Equals the Mann-Whitney U / (n_pos n_neg), ties counting 1/2 (Fawcett 2006, "An
    introduction to ROC analysis", section 7).
    """
    if fps.size > 3:  # more than two thresholds besides the origin
        keep = np.ones(fps.size, dtype=bool)
        keep[2:-1] = (np.diff(fps[1:], 2) != 0) | (np.diff(tps[1:], 2) != 0)
        fpr, tpr = fpr[keep], tpr[keep]
    # written out (np.trapezoid needs numpy >= 2): scipy.integrate.trapezoid's operations
    return float((np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0).sum())


def roc_points(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """ROC curve ``(fpr, tpr)`` for plots; one point per distinct threshold.

    ``roc_curve(members, scores, drop_intermediate=False)``: both arrays start at 0 and end
    at 1, FPR and TPR are non-decreasing.
    """
    s, m = _validate(scores, members)
    return _rates(*_roc_counts(s, m))


def _tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, max_fpr: float) -> float:
    return float(tpr[fpr <= max_fpr].max())  # the origin (0, 0) always qualifies


def _fpr_at_tpr(fpr: np.ndarray, tpr: np.ndarray, min_tpr: float) -> float:
    return float(fpr[tpr >= min_tpr].min())  # the end point (1, 1) always qualifies


def tpr_at_fpr(scores: ArrayLike, members: ArrayLike, max_fpr: float) -> float:
    """Largest TPR over ROC points with ``FPR <= max_fpr`` (0.0 if only the origin)."""
    b = _check_rate(max_fpr, "max_fpr")
    fpr, tpr = roc_points(scores, members)
    return _tpr_at_fpr(fpr, tpr, b)


def fpr_at_tpr(scores: ArrayLike, members: ArrayLike, min_tpr: float) -> float:
    """Smallest FPR over ROC points with ``TPR >= min_tpr``."""
    t = _check_rate(min_tpr, "min_tpr")
    fpr, tpr = roc_points(scores, members)
    return _fpr_at_tpr(fpr, tpr, t)


def membership_metrics(scores: ArrayLike, members: ArrayLike) -> dict[str, Any]:
    """Summary metrics of a membership-inference attack.

    Parameters
    ----------
    scores : array of shape (n,)
        Attack scores, higher = more likely member; finite.
    members : array of shape (n,)
        Ground truth, 1/True = member, 0/False = non-member; both classes present.

    Returns
    -------
    dict with
        ``auc``                 area under the ROC curve (``roc_auc_score``; ties count 1/2),
        ``tpr_at_1pct_fpr``     largest TPR with FPR <= 0.01,
        ``tpr_at_0p1pct_fpr``   largest TPR with FPR <= 0.001,
        ``fpr_at_80pct_tpr``    smallest FPR with TPR >= 0.8,
        ``n_members``, ``n_nonmembers``,
        ``min_fpr_resolution``  ``1 / n_nonmembers``: the smallest non-zero FPR measurable.
        When it exceeds 0.01 (or 0.001), the matching TPR is the TPR at FPR = 0.
    """
    s, m = _validate(scores, members)
    return _summary(*_roc_counts(s, m))


def _summary(fps: np.ndarray, tps: np.ndarray) -> dict[str, Any]:
    """:func:`membership_metrics` from the ROC counts."""
    fpr, tpr = _rates(fps, tps)
    n_members = int(tps[-1])
    n_nonmembers = int(fps[-1])
    return {
        "auc": _auc(fps, tps, fpr, tpr),
        "tpr_at_1pct_fpr": _tpr_at_fpr(fpr, tpr, 0.01),
        "tpr_at_0p1pct_fpr": _tpr_at_fpr(fpr, tpr, 0.001),
        "fpr_at_80pct_tpr": _fpr_at_tpr(fpr, tpr, 0.8),
        "n_members": n_members,
        "n_nonmembers": n_nonmembers,
        "min_fpr_resolution": 1.0 / n_nonmembers,
    }


def _midranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``, ties given the mean of the ranks they span."""
    order = np.argsort(x, kind="mergesort")
    s = x[order]
    first = np.r_[True, s[1:] != s[:-1]]  # where each run of equal values starts
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(s)] - 1
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = ((starts + ends) / 2 + 1)[np.cumsum(first) - 1]
    return ranks


def delong_placements(scores: ArrayLike, members: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """DeLong's placements ``(V10 over the members, V01 over the non-members)``
    (:mod:`fedaudit.intervals` gives the formula); their means are the AUC."""
    return _placements(*_validate(scores, members))


def _placements(s: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = s[m == 1], s[m == 0]
    pooled = _midranks(np.concatenate([x, y]))
    v10 = (pooled[:len(x)] - _midranks(x)) / len(y)
    v01 = 1.0 - (pooled[len(x):] - _midranks(y)) / len(x)
    return v10, v01


def auc_interval(scores: ArrayLike, members: ArrayLike, auc: float | None = None,
                 level: float = LEVEL) -> tuple[float, float]:
    """DeLong's ``level`` interval of the AUC of ``scores`` against ``members``
    (:mod:`fedaudit.intervals` gives the formula), centred on ``auc`` when given (the AUC
    of :func:`membership_metrics`; by default the placements' mean)."""
    return _auc_interval(*_validate(scores, members), auc, level)


def _auc_interval(s: np.ndarray, m: np.ndarray, auc: float | None,
                  level: float) -> tuple[float, float]:
    level = check_level(level)
    v10, v01 = _placements(s, m)
    if len(v10) < 2 or len(v01) < 2:
        return 0.0, 1.0
    centre = float(v10.mean()) if auc is None else float(auc)
    return normal_interval(centre, v10.var(ddof=1) / len(v10) + v01.var(ddof=1) / len(v01),
                           level)


#: the FPR bounds of the reported TPRs: metric name -> bound (its chance TPR)
TPR_BOUNDS = {"tpr_at_1pct_fpr": 0.01, "tpr_at_0p1pct_fpr": 0.001}


def _tpr_points(fps: np.ndarray, tps: np.ndarray) -> dict[str, tuple[int, int]]:
    """Per TPR of :data:`TPR_BOUNDS`, the ROC point it is read at: ``(k, j)``, the members
    and non-members above the threshold (the point :func:`_tpr_at_fpr` reads: the last with
    FPR <= bound, since fps and tps rise together)."""
    fpr, _ = _rates(fps, tps)
    at = {name: int(np.flatnonzero(fpr <= bound)[-1]) for name, bound in TPR_BOUNDS.items()}
    return {name: (int(tps[i]), int(fps[i])) for name, i in at.items()}


@dataclass(frozen=True)
class MembershipMetrics:
    """The metrics ``results.json`` keeps of one attack on one set of samples: those of
    :func:`membership_metrics` without the counts (``min_fpr_resolution`` is
    ``1 / n_nonmembers``), and, when made from the scores (:meth:`of`), their 95 %
    intervals (:mod:`fedaudit.intervals`: DeLong's for the AUC, Clopper-Pearson's on the
    members for each TPR) and the number of members.  :meth:`as_dict` is the results.json
    entry."""

    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_0p1pct_fpr: float
    fpr_at_80pct_tpr: float
    min_fpr_resolution: float
    auc_ci: tuple[float, float] | None = None
    tpr_at_1pct_fpr_ci: tuple[float, float] | None = None
    tpr_at_0p1pct_fpr_ci: tuple[float, float] | None = None
    n_members: int | None = None
    #: each TPR's verdict against chance (:func:`fedaudit.intervals.threshold_verdict`)
    tpr_verdicts: tuple[str, ...] | None = None

    @classmethod
    def of(cls, scores: ArrayLike, members: ArrayLike) -> "MembershipMetrics":
        """:func:`membership_metrics` of ``scores`` against ``members`` (same checks), with
        the intervals."""
        s, member = _validate(scores, members)
        fps, tps = _roc_counts(s, member)  # once, for the metrics and the TPRs' points
        m = _summary(fps, tps)
        n, n_neg = m["n_members"], m["n_nonmembers"]
        points = _tpr_points(fps, tps)
        return cls(**{f.name: m[f.name] for f in fields(cls)[:5]},
                   auc_ci=_auc_interval(s, member, m["auc"], LEVEL), n_members=n,
                   tpr_verdicts=tuple(threshold_verdict(k, j, n, n_neg)
                                      for k, j in points.values()),
                   **{f"{name}_ci": clopper_pearson(k, n) for name, (k, _) in points.items()})

    def verdicts(self) -> dict[str, str] | None:
        """Each metric against chance: the AUC's interval against 0.5
        (:func:`fedaudit.intervals.chance_verdict`), each TPR by the exact test of
        :func:`fedaudit.intervals.threshold_verdict`; None without them."""
        if self.auc_ci is None or self.tpr_verdicts is None:
            return None
        return {"auc": chance_verdict(self.auc_ci, 0.5),
                **dict(zip(TPR_BOUNDS, self.tpr_verdicts))}

    def as_dict(self) -> dict[str, Any]:
        """The results.json entry: ``{"auc": ..., "tpr_at_1pct_fpr": ..., ...}``, then, when
        there are intervals, ``auc_ci`` / ``tpr_at_1pct_fpr_ci`` / ``tpr_at_0p1pct_fpr_ci``
        as ``[low, high]``, ``ci_level``, ``n_members`` and ``verdict`` (per metric)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)[:5]}
        if self.auc_ci is not None:
            out.update({k: list(getattr(self, k)) for k in
                        ("auc_ci", "tpr_at_1pct_fpr_ci", "tpr_at_0p1pct_fpr_ci")})
            out.update(ci_level=LEVEL, n_members=self.n_members, verdict=self.verdicts())
        return out
