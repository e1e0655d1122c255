"""RMIA, the relative membership-inference attack (Zarifzadeh et al., "Low-Cost
High-Power Membership Inference Attacks", ICML 2024) -- docs/algorithms.md section 8: the
target's likelihood ratio of a sample against population samples z, each normalised by the
reference models' mean probability (offline: ``((1 + a)/2) mean_OUT + (1 - a)/2``, ``a``
tuned on the references by :mod:`attacks.membership.rmia_tuning`).

:func:`rmia_scores` equals ML Privacy Meter's ``run_rmia`` to the last bit; the registered
attack queries the target once per audit sample and once per population sample (shared by
all samples).  Higher score = more likely a member.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.membership.reference_signals import EPS, ReferenceSignals, true_label_probs
from attacks.membership.registry import AttackScores, ReferenceNeeds, register_attack
from attacks.membership.rmia_tuning import tune_offline_a
from attacks.membership.sequences import as_outcomes, outcome_labels
from fedaudit.options import option

__all__ = ["RMIA_OPTIONS", "rmia_attack", "rmia_scores"]


def _marginal(ref_p: np.ndarray, offline_a: float | None) -> np.ndarray:
    """RMIA's p(.) from the references' true-label probabilities (R, M): their mean;
    offline, ``((1 + a) / 2) * mean_OUT + (1 - a) / 2`` (the paper's approximation of the
    IN models' probability from the OUT ones)."""
    mean = ref_p.mean(axis=0)
    if offline_a is not None:
        mean = (1.0 + offline_a) / 2.0 * mean + (1.0 - offline_a) / 2.0
    return np.maximum(mean, EPS)


def rmia_scores(target_px: ArrayLike, reference_px: ArrayLike, target_pz: ArrayLike,
                reference_pz: ArrayLike, *, gamma: float = 1.0,
                offline_a: float | None = None) -> np.ndarray:
    """RMIA membership scores (Zarifzadeh et al. 2024, eq. 4).

    ``score(x) = Pr_z[ LR(x, z) >= gamma ]`` over the population samples z, with
    ``LR(x, z) = (p(x|theta) / p(x)) / (p(z|theta) / p(z))``: ``p(.|theta)`` the target's
    probability of the true label, ``p(.)`` the mean of the references' (in offline mode,
    ``offline_a`` given: ``((1 + a)/2) mean_OUT + (1 - a)/2``, for x and z alike).

    Parameters
    ----------
    target_px : (N,) the target's true-label probabilities on the audit samples.
    reference_px : (R, N) the references' on the same samples (IN and OUT alike, online).
    target_pz, reference_pz : (Z,) and (R, Z), the same on the population samples.
    gamma : the likelihood-ratio threshold (> 0).
    offline_a : None online; in ``[0, 1]`` offline.
    """
    tx, tz = (np.asarray(v, dtype=np.float64) for v in (target_px, target_pz))
    rx, rz = (np.asarray(v, dtype=np.float64) for v in (reference_px, reference_pz))
    if tx.ndim != 1 or rx.shape != (rx.shape[0], tx.shape[0]) or rx.ndim != 2:
        raise ValueError(f"target_px must be (N,) and reference_px (R, N); got {tx.shape} "
                         f"and {rx.shape}")
    if tz.ndim != 1 or rz.ndim != 2 or rz.shape != (rx.shape[0], tz.shape[0]):
        raise ValueError(f"target_pz must be (Z,) and reference_pz (R, Z) with the same R; "
                         f"got {tz.shape} and {rz.shape}")
    if tz.size == 0:
        raise ValueError("no population samples z")
    for name, v in (("target_px", tx), ("reference_px", rx), ("target_pz", tz),
                    ("reference_pz", rz)):
        if not np.all(np.isfinite(v)) or v.min(initial=0.0) < 0.0 or v.max(initial=0.0) > 1.0:
            raise ValueError(f"{name} must hold probabilities in [0, 1]")
    if not gamma > 0:
        raise ValueError(f"gamma must be > 0, got {gamma}")
    if offline_a is not None and not 0.0 <= offline_a <= 1.0:
        raise ValueError(f"offline_a must be in [0, 1], got {offline_a}")
    ratio_x = tx / _marginal(rx, offline_a)
    ratio_z = np.sort(tz / _marginal(rz, offline_a))
    # LR >= gamma  <=>  ratio_z <= ratio_x / gamma
    return np.searchsorted(ratio_z, ratio_x / gamma, side="right") / ratio_z.size


def _check_a(v: Any) -> str | None:
    if v == "auto" or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
        return None
    return f"{v!r} is not allowed; allowed: 'auto' or a number in [0, 1]"


RMIA_OPTIONS = {
    "gamma": option(float, 1.0, "likelihood-ratio threshold: score = Pr_z[LR(x, z) >= gamma]",
                    min=0.0, min_exclusive=True),
    "a": option((str, float), "auto", "offline mode: p(x) = ((1 + a)/2) mean_OUT(x) + "
                "(1 - a)/2; auto: the a of the grid 0, 0.1, ..., 1 that best attacks one "
                "reference with the others (Privacy Meter's tune_offline_a), recorded in "
                "results.json", check=_check_a),
    "population": option(int, 0, "population samples z drawn from the population split "
                         "(0 = all of it)", min=0, unset=0),
}


def _population_cost(shape: Any, **_: Any) -> float:
    return 1.0  # plus Z population queries shared by every sample (counted when run)


def _rmia_needs(*, a: float | str = "auto", **_: Any) -> ReferenceNeeds:
    """With ``a = "auto"``, the references' outputs on the tuning samples (offline)."""
    return ReferenceNeeds(tuning=a == "auto")


def _tuned_a(references: ReferenceSignals) -> tuple[float, dict]:
    t = references.tuning
    if t is None:
        raise ValueError("rmia a = 'auto' needs tuning signals (offline references)")
    p = true_label_probs(t.probs, outcome_labels(np.asarray(t.y)))
    return tune_offline_a(p[0], p[1:], t.in_mask[0], t.in_mask[1:])


@register_attack("rmia", label="RMIA", options=RMIA_OPTIONS, cost=_population_cost,
                 references=True, reference_needs=_rmia_needs,
                 reference_summary=("a", "a_tuned"), data=("image", "text"), order=300)
def rmia_attack(oracle: Any, x: Any, y: Any, *, references: ReferenceSignals,
                gamma: float = 1.0, a: float | str = "auto",
                population: int | None = None) -> AttackScores:
    """RMIA against the oracle: one query per audit sample and one per population sample z
    (the first ``population`` of them; all by default).  Offline with ``a = "auto"``, ``a``
    is tuned on the references first (:func:`tune_offline_a`, no target query)."""
    labels = np.asarray(y)
    z = slice(None, population or None)
    zx, zy = references.population_x[z], np.asarray(references.population_y[z])
    info: dict[str, Any] = {}
    offline_a = None
    if not references.online:
        if a == "auto":
            offline_a, aucs = _tuned_a(references)
            info = {"a": offline_a, "a_tuned": True,
                    "a_tuning_auc": {f"{k:.1f}": round(v, 6) for k, v in aucs.items()}}
        else:
            offline_a = float(a)
            info = {"a": offline_a, "a_tuned": False}
    tx = true_label_probs(*as_outcomes(np.asarray(oracle.predict_proba(x), dtype=np.float64),
                                        labels))
    tz = true_label_probs(*as_outcomes(np.asarray(oracle.predict_proba(zx), dtype=np.float64),
                                        zy))
    rx = true_label_probs(references.probs, outcome_labels(labels))
    rz = true_label_probs(references.population_probs[:, z], outcome_labels(zy))
    return AttackScores(rmia_scores(tx, rx, tz, rz, gamma=gamma, offline_a=offline_a), info)
