"""Reference-model attacks: LiRA (Carlini et al., S&P 2022) and RMIA (Zarifzadeh et al.,
ICML 2024) -- docs/algorithms.md section 8.

Both compare what the target says about a sample with what *reference models* -- models
trained like the target, by the auditor, on data it controls -- say about it.  The
auditor's side (which data each reference trained on, training them, caching them) is
:mod:`fedaudit.audit.references`; what reaches an attack is a :class:`ReferenceSignals`: the
references' probabilities on the audit samples (and, for RMIA, on population samples that
no model trained on), plus which references had each audit sample IN (online mode).

The scoring functions (:func:`lira_scores`, :func:`rmia_scores`) are pure functions over
arrays, validated like scikit-learn's metrics; the registered attacks query the target
once per audit sample (RMIA: plus once per population sample, shared by all samples).
Higher score = more likely a member, as for every attack here.

Sequences (text data): a sequence is one two-outcome sample [pbar, 1 - pbar], pbar its
geometric-mean target probability (:mod:`attacks.sequences`); the target's outputs are
reduced here, the references' when the auditor collects them (:mod:`fedaudit.audit.
references`), so :class:`ReferenceSignals` hold (R, N, 2) on text.  LiRA's augmented
queries are images only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.augment import AUGMENTATIONS, augmented_views
from attacks.registry import AttackScores, ReferenceNeeds, register_attack
from attacks.rmia_tuning import A_GRID, tune_offline_a
from attacks.sequences import as_outcomes, outcome_labels
from fedaudit.options import option

__all__ = ["A_GRID", "ReferenceSignals", "TuningSignals", "lira_scores", "lira_scores_augmented",
           "logit_confidence", "rmia_scores", "tune_offline_a"]

#: floor of probabilities and of sums of probabilities before a log (an output that
#: underflowed to 0 in float32); the same floor the baselines use
EPS = 1e-30
#: floor of a fitted standard deviation (all references gave the same statistic)
MIN_STD = 1e-12


@dataclass(frozen=True)
class ReferenceSignals:
    """What the reference models say, aligned with the audit samples ``x`` an attack gets.

    Attributes
    ----------
    probs : (R, N, C) float64 softmax outputs of the R references on the N audit samples.
    in_mask : (R, N) bool, True where reference r trained on audit sample n (online mode);
        None offline (no reference saw any audit sample).
    population_x, population_y : the population samples z (never trained on by the target
        nor by any reference) and their labels.
    population_probs : (R, Z, C) the references' outputs on them.
    views : (A, R, N, C) the references' outputs on the A augmented views of the audit
        samples (:func:`attacks.augment.augmented_views`, the sample itself first) with
        the name of the augmentation in ``augment``; None without augmented queries.
    tuning : what RMIA's ``a = "auto"`` attacks (:class:`TuningSignals`); None online.
    """

    probs: np.ndarray
    in_mask: np.ndarray | None
    population_x: np.ndarray
    population_y: np.ndarray
    population_probs: np.ndarray
    views: np.ndarray | None = None
    augment: str = "none"
    tuning: "TuningSignals | None" = None

    @property
    def online(self) -> bool:
        return self.in_mask is not None

    @classmethod
    def out_only(cls, probs: ArrayLike, x: np.ndarray, y: np.ndarray) -> "ReferenceSignals":
        """Offline references without a population: ``probs`` (R, N, C) of R models that
        never trained on the N samples (FedMIA's other clients of a round, the DP audit's
        references on its canaries); ``x``, ``y`` give the population's dtypes."""
        p = np.asarray(probs, dtype=np.float64)
        return cls(p, None, x[:0], y[:0], np.zeros((p.shape[0], 0, p.shape[2])))


@dataclass(frozen=True)
class TuningSignals:
    """Samples whose membership in every reference is known (the references' own training
    data and data none trained on): ``probs`` (R, T, C) the references' outputs, ``y`` (T,)
    the labels, ``in_mask`` (R, T) True where reference r trained on sample t."""

    probs: np.ndarray
    y: np.ndarray
    in_mask: np.ndarray


def _proba(p: ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(a)) or a.min(initial=0.0) < 0.0:
        raise ValueError(f"{name} must hold finite probabilities >= 0")
    return a


def _labels(y: ArrayLike, n: int, classes: int, name: str) -> np.ndarray:
    a = np.asarray(y)
    if a.shape != (n,) or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be ({n},) integer labels, got shape {a.shape}, "
                         f"dtype {a.dtype}")
    if a.size and (a.min() < 0 or a.max() >= classes):
        raise ValueError(f"{name} must lie in 0..{classes - 1}")
    return a.astype(np.int64)


def logit_confidence(proba: ArrayLike, y: ArrayLike) -> np.ndarray:
    """LiRA's statistic ``phi = log p_y - log(sum_{y' != y} p_y')`` for each sample.

    ``proba`` is (..., N, C); ``y`` (N,).  The sum runs over the other classes' own
    probabilities (never ``1 - p_y``, which cancels to 0 when ``p_y`` rounds to 1), each
    term floored at :data:`EPS`, so confident members keep distinct, finite statistics.
    """
    p = _proba(proba, "proba")
    if p.ndim < 2:
        raise ValueError(f"proba must be (..., N, C), got shape {p.shape}")
    labels = _labels(y, p.shape[-2], p.shape[-1], "y")
    onehot = np.zeros(p.shape[-2:], dtype=bool)
    onehot[np.arange(len(labels)), labels] = True
    p_y = np.where(onehot, p, 0.0).sum(axis=-1)
    rest = np.where(onehot, 0.0, p).sum(axis=-1)
    return np.log(np.maximum(p_y, EPS)) - np.log(np.maximum(rest, EPS))


def _fit(values: np.ndarray, mask: np.ndarray, fixed_variance: bool,
         what: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample mean and std of ``values`` (R, N) over the references where ``mask``;
    with ``fixed_variance`` one std for all samples: the pooled within-sample deviation
    sqrt(sum (v - mean_n)^2 / count)."""
    count = mask.sum(axis=0)
    if np.any(count == 0):
        raise ValueError(f"sample {int(np.argmax(count == 0))} has no {what} reference")
    mean = np.where(mask, values, 0.0).sum(axis=0) / count
    sq = np.where(mask, (values - mean) ** 2, 0.0)
    if fixed_variance:
        std = np.full(values.shape[1], np.sqrt(sq.sum() / count.sum()))
    else:
        std = np.sqrt(sq.sum(axis=0) / count)
    return mean, np.maximum(std, MIN_STD)


def lira_scores(target_phi: ArrayLike, reference_phi: ArrayLike,
                in_mask: ArrayLike | None = None, *, fixed_variance: bool = True) -> np.ndarray:
    """LiRA membership scores (Carlini et al. 2022, Algorithm 1).

    Online (``in_mask`` given, (R, N) bool): fit Gaussians to each sample's statistic over
    the references that trained on it (IN) and those that did not (OUT); the score is the
    log likelihood ratio ``log N(phi; mu_in, s_in) - log N(phi; mu_out, s_out)``.
    Offline (``in_mask`` None: every reference is OUT): the one-sided test
    ``log Pr[Z <= phi]``, ``Z ~ N(mu_out, s_out^2)`` -- high when the target is more
    confident than the models that never saw the sample.

    ``fixed_variance``: one standard deviation for all samples (per IN / OUT), the pooled
    within-sample deviation -- the paper's advice with few references (a per-sample
    variance from two values is noise).

    Parameters
    ----------
    target_phi : (N,) the target's statistic (:func:`logit_confidence`).
    reference_phi : (R, N) the references' statistics on the same samples.
    """
    t = np.asarray(target_phi, dtype=np.float64)
    r = np.asarray(reference_phi, dtype=np.float64)
    if t.ndim != 1 or r.ndim != 2 or r.shape[1] != t.shape[0]:
        raise ValueError(f"target_phi must be (N,) and reference_phi (R, N); got {t.shape} "
                         f"and {r.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(r))):
        raise ValueError("statistics must be finite")
    # here, not at the top: every client actor imports the attacks (0.3 s of its start-up)
    from scipy.stats import norm

    if in_mask is None:
        mu, s = _fit(r, np.ones(r.shape, dtype=bool), fixed_variance, "OUT")
        return norm.logcdf(t, loc=mu, scale=s)
    m = np.asarray(in_mask)
    if m.shape != r.shape or m.dtype != bool:
        raise ValueError(f"in_mask must be a bool array of shape {r.shape}, got {m.dtype} "
                         f"{m.shape}")
    mu_in, s_in = _fit(r, m, fixed_variance, "IN")
    mu_out, s_out = _fit(r, ~m, fixed_variance, "OUT")
    return norm.logpdf(t, mu_in, s_in) - norm.logpdf(t, mu_out, s_out)


def lira_scores_augmented(target_phi: ArrayLike, reference_phi: ArrayLike,
                          in_mask: ArrayLike | None = None, *,
                          fixed_variance: bool = True) -> np.ndarray:
    """LiRA with augmented queries (Carlini et al. 2022, section VI-B): one Gaussian (pair)
    per augmentation, fitted to that augmentation's statistic over the references; the
    score is the mean over augmentations of :func:`lira_scores`' per-augmentation score
    (the paper's code: ``score.mean(1)`` over the queries).

    ``target_phi`` (A, N) and ``reference_phi`` (A, R, N): the A augmented views'
    statistics; ``in_mask`` (R, N) as for :func:`lira_scores` (a view is IN when its
    sample is)."""
    t = np.asarray(target_phi, dtype=np.float64)
    r = np.asarray(reference_phi, dtype=np.float64)
    if t.ndim != 2 or r.ndim != 3 or r.shape[0] != t.shape[0] or r.shape[2] != t.shape[1]:
        raise ValueError(f"target_phi must be (A, N) and reference_phi (A, R, N); got "
                         f"{t.shape} and {r.shape}")
    return np.mean([lira_scores(t[a], r[a], in_mask, fixed_variance=fixed_variance)
                    for a in range(t.shape[0])], axis=0)


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


def _true_label_probs(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.take_along_axis(p, np.broadcast_to(y[..., None], p.shape[:-1] + (1,)),
                              axis=-1)[..., 0]


def _check_a(v: Any) -> str | None:
    if v == "auto" or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1):
        return None
    return f"{v!r} is not allowed; allowed: 'auto' or a number in [0, 1]"


LIRA_OPTIONS = {
    "fixed_variance": option(bool, True, "one Gaussian variance for all samples (per IN / "
                             "OUT), the paper's advice with few reference models"),
    "augment": option(str, "none", "augmented queries, one Gaussian per augmentation "
                      "(images): none (1 query), flip (2), flip+shift (10)",
                      choices=AUGMENTATIONS),
}

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


def _lira_cost(shape: Any, augment: str = "none", **_: Any) -> float:
    return float(len(augmented_views(np.zeros((1, *shape), dtype=np.float32), augment)))


def _lira_needs(*, augment: str = "none", **_: Any) -> ReferenceNeeds:
    """With ``augment``, the references' outputs on the augmented views too."""
    return ReferenceNeeds(augment=augment)


def _rmia_needs(*, a: float | str = "auto", **_: Any) -> ReferenceNeeds:
    """With ``a = "auto"``, the references' outputs on the tuning samples (offline)."""
    return ReferenceNeeds(tuning=a == "auto")


@register_attack("lira", label="LiRA", options=LIRA_OPTIONS, cost=_lira_cost, references=True,
                 reference_needs=_lira_needs, data=("image", "text"), order=300)
def lira_attack(oracle: Any, x: Any, y: Any, *, references: ReferenceSignals,
                fixed_variance: bool = True, augment: str = "none") -> AttackScores:
    """LiRA against the oracle: the statistic of the true label on each sample (and, with
    ``augment``, on each of its augmented views: one query per view)."""
    labels = np.asarray(y)
    if augment == "none":
        target = logit_confidence(*as_outcomes(oracle.predict_proba(x), labels))
        refs = logit_confidence(references.probs, outcome_labels(labels))
        scores = lira_scores(target, refs, references.in_mask, fixed_variance=fixed_variance)
        return AttackScores(scores, {"augment": "none", "queries_per_view": 1})
    if references.views is None or references.augment != augment:
        raise ValueError(f"lira augment = {augment!r}: the reference signals hold the views "
                         f"of {references.augment!r}")
    views = augmented_views(np.asarray(x), augment)
    target = np.stack([logit_confidence(oracle.predict_proba(v), labels) for v in views])
    refs = logit_confidence(references.views, labels)
    scores = lira_scores_augmented(target, refs, references.in_mask,
                                   fixed_variance=fixed_variance)
    return AttackScores(scores, {"augment": augment, "queries_per_view": len(views)})


def _tuned_a(references: ReferenceSignals) -> tuple[float, dict]:
    t = references.tuning
    if t is None:
        raise ValueError("rmia a = 'auto' needs tuning signals (offline references)")
    p = _true_label_probs(t.probs, outcome_labels(np.asarray(t.y)))
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
    tx = _true_label_probs(*as_outcomes(np.asarray(oracle.predict_proba(x), dtype=np.float64),
                                        labels))
    tz = _true_label_probs(*as_outcomes(np.asarray(oracle.predict_proba(zx), dtype=np.float64),
                                        zy))
    rx = _true_label_probs(references.probs, outcome_labels(labels))
    rz = _true_label_probs(references.population_probs[:, z], outcome_labels(zy))
    return AttackScores(rmia_scores(tx, rx, tz, rz, gamma=gamma, offline_a=offline_a), info)


@register_attack("fedmia", label="FedMIA", references=True, server_view=True,
                 data=("image", "text"), order=300)
def fedmia_attack(oracle: Any, x: Any, y: Any, *,
                  references: ReferenceSignals) -> np.ndarray:
    """FedMIA (Zhu et al. 2024, "all for one", arXiv 2402.06289) for one client's model in
    one round: the OTHER clients' models of that round never trained on this client's data,
    so they are free OUT references; the score is LiRA's one-sided offline test with a
    per-sample Gaussian over them (:func:`lira_scores`, ``fixed_variance=False``).  The
    curious server runs it (``attack.targets`` = clients); the combination over rounds is
    in :mod:`fedaudit.audit.targets.client_models`."""
    labels = np.asarray(y)
    target = logit_confidence(*as_outcomes(oracle.predict_proba(x), labels))
    others = logit_confidence(references.probs, outcome_labels(labels))
    return lira_scores(target, others, None, fixed_variance=False)
