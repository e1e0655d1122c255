"""LiRA, the likelihood-ratio attack (Carlini et al., "Membership Inference Attacks From
First Principles", S&P 2022) -- docs/algorithms.md section 8: the target's statistic
``phi`` (:func:`~attacks.membership.reference_signals.logit_confidence`) against Gaussians
fitted to the reference models' statistics on the same sample, online (IN and OUT
references) or offline (OUT only), optionally with augmented queries.

:func:`lira_scores` is a pure function over arrays, validated like scikit-learn's metrics;
the registered attack queries the target once per audit sample (per view with
``augment``).  Higher score = more likely a member, as for every attack here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.membership.augment import (AUGMENTATIONS, augmented_views, trained_queries,
                                        untrained_queries)
from attacks.membership.reference_signals import MIN_STD, ReferenceSignals, logit_confidence
from attacks.membership.registry import AttackScores, ReferenceNeeds, register_attack
from attacks.membership.sequences import as_outcomes, outcome_labels
from fedaudit.options import option

__all__ = ["LIRA_OPTIONS", "lira_attack", "lira_scores", "lira_scores_augmented"]


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


LIRA_OPTIONS = {
    "fixed_variance": option(bool, True, "one Gaussian variance for all samples (per IN / "
                             "OUT), the paper's advice with few reference models"),
    "augment": option(str, "auto", "augmented queries, one Gaussian per augmentation "
                      "(images): none (1 query), flip (2), flip+shift (10); auto: the views "
                      "the models trained on (train.augment: none -> none, flip -> flip, "
                      "flip+crop -> flip+shift)", choices=("auto", *AUGMENTATIONS)),
}

def _lira_cost(shape: Any, augment: str = "none", **_: Any) -> float:
    return float(len(augmented_views(np.zeros((1, *shape), dtype=np.float32), augment)))


def _lira_resolve(options: dict[str, Any], train: Any) -> tuple[dict[str, Any], str | None]:
    """``augment = "auto"``: the query views training showed the models
    (:func:`attacks.membership.augment.trained_queries` of ``train``, the ``[train]``
    table); an explicit choice stays, with a warning when it asks for views no model
    trained on."""
    query = options.get("augment", "auto")
    if query == "auto":
        return {**options, "augment": trained_queries(train.augment, train.augment_padding)}, None
    return options, untrained_queries(query, train.augment, train.augment_padding)


def _lira_needs(*, augment: str = "none", **_: Any) -> ReferenceNeeds:
    """With ``augment``, the references' outputs on the augmented views too."""
    return ReferenceNeeds(augment=augment)


@register_attack("lira", label="LiRA", options=LIRA_OPTIONS, cost=_lira_cost, references=True,
                 reference_needs=_lira_needs, resolve=_lira_resolve, data=("image", "text"),
                 order=300)
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
