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

from fedaudit.intervals import (ABOVE, LEVEL, check_level, clopper_pearson, normal_interval,
                                threshold_verdict)
from fedaudit.verdicts import (INCONCLUSIVE, LEAKS, Estimate, Rule, Verdict, auc_estimate,
                               decide)
from fedaudit.verdicts.ranks import check_scores as _validate
from fedaudit.verdicts.ranks import delong_placements
from fedaudit.verdicts.ranks import placements as _placements

__all__ = [
    "MEMBERSHIP_RULE",
    "MembershipMetrics",
    "auc_interval",
    "estimate_of_entry",
    "delong_placements",
    "membership_metrics",
    "roc_points",
    "tpr_at_fpr",
    "fpr_at_tpr",
]


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


#: what a membership AUC is judged against (:mod:`fedaudit.verdicts`): chance is 0.5, an AUC
#: within 0.05 of it is no leak, and one significantly below it is a leak with the score
#: flipped
MEMBERSHIP_RULE = Rule(delta=0.05, two_sided=True, figure="AUC")


@dataclass(frozen=True)
class MembershipMetrics:
    """The metrics ``results.json`` keeps of one attack on one set of samples: those of
    :func:`membership_metrics` without the counts (``min_fpr_resolution`` is
    ``1 / n_nonmembers``), and, when made from the scores (:meth:`of`), the AUC's test
    against chance (:func:`fedaudit.verdicts.auc_estimate`: DeLong, or the exact
    Mann-Whitney test and Newcombe's interval below 50 samples of a class, or clustered by
    client), the TPRs' 95 % intervals (Clopper-Pearson's on the members) and the number of
    members.  :meth:`as_dict` is the results.json entry."""

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
    #: the AUC tested against chance at its unit of independence
    auc_test: Estimate | None = None

    @classmethod
    def of(cls, scores: ArrayLike, members: ArrayLike, clusters: ArrayLike | None = None,
           unit: str = "client") -> "MembershipMetrics":
        """:func:`membership_metrics` of ``scores`` against ``members`` (same checks), with
        the intervals and the AUC's test; ``clusters``: each score's unit of independence
        (named ``unit``) when the scores are not independent samples (several clients'
        models scoring the same non-members)."""
        s, member = _validate(scores, members)
        fps, tps = _roc_counts(s, member)  # once, for the metrics and the TPRs' points
        m = _summary(fps, tps)
        n, n_neg = m["n_members"], m["n_nonmembers"]
        points = _tpr_points(fps, tps)
        test = auc_estimate(s, member, clusters, auc=m["auc"], unit=unit)
        return cls(**{f.name: m[f.name] for f in fields(cls)[:5]},
                   auc_ci=test.interval, n_members=n,
                   tpr_verdicts=tuple(threshold_verdict(k, j, n, n_neg)
                                      for k, j in points.values()),
                   auc_test=test,
                   **{f"{name}_ci": clopper_pearson(k, n) for name, (k, _) in points.items()})

    def auc_verdict(self) -> Verdict | None:
        """The AUC's own verdict (:func:`fedaudit.verdicts.decide` on this estimate alone,
        :data:`MEMBERSHIP_RULE`; a cell that picks the best of several attacks or looks at
        every client corrects for it); None without a test."""
        return None if self.auc_test is None else decide(MEMBERSHIP_RULE, self.auc_test)

    def verdicts(self) -> dict[str, str] | None:
        """Each metric's verdict: the AUC's (:meth:`auc_verdict`), each TPR's by the exact
        test of :func:`fedaudit.intervals.threshold_verdict` (above chance: leaks; anything
        else inconclusive: a TPR at a low FPR has no equivalence margin); None without
        them."""
        if self.auc_test is None or self.tpr_verdicts is None:
            return None
        return {"auc": self.auc_verdict().outcome,
                **{k: LEAKS if v == ABOVE else INCONCLUSIVE
                   for k, v in zip(TPR_BOUNDS, self.tpr_verdicts)}}

    def as_dict(self) -> dict[str, Any]:
        """The results.json entry: ``{"auc": ..., "tpr_at_1pct_fpr": ..., ...}``, then, when
        there are intervals, ``auc_ci`` / ``tpr_at_1pct_fpr_ci`` / ``tpr_at_0p1pct_fpr_ci``
        as ``[low, high]``, ``ci_level``, ``n_members``, ``verdict`` (per metric) and
        ``auc_test`` (the AUC's test: p-values, method, unit and units)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)[:5]}
        if self.auc_ci is not None:
            out.update({k: list(getattr(self, k)) for k in
                        ("auc_ci", "tpr_at_1pct_fpr_ci", "tpr_at_0p1pct_fpr_ci")})
            out.update(ci_level=LEVEL, n_members=self.n_members, verdict=self.verdicts())
        if self.auc_test is not None:
            t = self.auc_test
            out["auc_test"] = {"p_above": t.p_above, "p_below": t.p_below,
                               "method": t.method, "unit": t.unit, "units": t.units}
        return out


def estimate_of_entry(entry: Any, scope: str = "pooled", attack: str = "") -> Estimate | None:
    """The AUC's :class:`~fedaudit.verdicts.Estimate` of a results.json membership entry
    (:meth:`MembershipMetrics.as_dict`), named ``scope`` and ``attack``; None when the entry
    has no test (an older run, or a single class)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("auc_test"), dict):
        return None
    t, ci = entry["auc_test"], entry.get("auc_ci")
    return Estimate(float(entry["auc"]), tuple(ci) if isinstance(ci, list) else None, 0.5,
                    t.get("p_above"), t.get("p_below"), str(t.get("method", "")),
                    str(t.get("unit", "sample")), int(t.get("units", 0)), scope=scope,
                    attack=attack)
