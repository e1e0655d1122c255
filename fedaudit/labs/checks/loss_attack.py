"""Checks of lab 2, membership inference by hand (the LOSS attack, ROC, low FPR)."""

from __future__ import annotations

import numpy as np

from fedaudit.labs.checks import (AUC_TOL, as_array, as_number, call,
                                  close, fail, ok, orientation_hint, same_values)

#: a hand-made case: three samples, three classes
_PROBA = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.25, 0.5, 0.25]])
_Y = np.array([0, 1, 1])


def loss_scores(fn) -> None:
    """Task 2.1: ``fn(proba, y)`` is ``log p_y`` (= -cross-entropy, higher = member)."""
    task = "2.1"
    want = np.log(_PROBA[np.arange(3), _Y])  # log 0.7, log 0.1, log 0.5
    got = as_array(task, call(task, fn, _PROBA.copy(), _Y.copy()), "loss_scores(proba, y)",
                   shape=(3,))
    if np.allclose(got, -want, atol=1e-12, rtol=0):
        fail(task, "you return the loss itself (positive for a low p_y); the attack's score "
                   "must be higher for members, who have a LOW loss: return -loss = log p_y")
    if np.allclose(got, _PROBA[np.arange(3), _Y], atol=1e-12, rtol=0):
        fail(task, "you return p_y (the confidence attack); the LOSS score is its log")
    # float64 logs of the same numbers: agreement to a few ulps
    same_values(task, got, want, "loss_scores", 1e-12,
                "use the probability of the TRUE label y of each row, then take its log")
    ok(task, "loss_scores(proba, y) = log p_y, oriented higher = member")


def roc_summary(fn, scores, member) -> None:
    """Task 2.2: ``fn(scores, member)`` returns ``(auc, tpr_at_1pct_fpr)`` computed with
    scikit-learn, equal to :func:`fedaudit.metrics.membership_metrics`."""
    from fedaudit.metrics import membership_metrics

    task = "2.2"
    out = call(task, fn, np.asarray(scores), np.asarray(member))
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        fail(task, "return a pair (auc, tpr_at_1pct_fpr)")
    auc, tpr = as_number(task, out[0], "auc"), as_number(task, out[1], "tpr_at_1pct_fpr")
    m = membership_metrics(scores, member)
    # same scores, same float64 ROC arithmetic: exact up to summation order
    if not close(auc, m["auc"], 1e-12):
        if close(auc, 1 - m["auc"], 1e-12):
            fail(task, orientation_hint(auc) + " -- or you passed (scores, member) to "
                       "roc_auc_score in the wrong order: it takes (y_true, y_score)")
        fail(task, f"your AUC is {auc:.4f}, expected {m['auc']:.4f}: "
                   "use sklearn.metrics.roc_auc_score(member, scores)")
    if not close(tpr, m["tpr_at_1pct_fpr"], 1e-12):
        fail(task, f"your TPR at 1% FPR is {tpr:.4f}, expected {m['tpr_at_1pct_fpr']:.4f}: "
                   "take roc_curve(member, scores) and the LARGEST tpr among points with "
                   "fpr <= 0.01 (no interpolation)")
    ok(task, f"AUC {auc:.3f}, TPR@1%FPR {tpr:.3f}")


def matches_fedaudit(my_auc, results: dict) -> None:
    """Task 2.3: the student's LOSS AUC on the target equals fedaudit's pooled one."""
    task = "2.3"
    auc = as_number(task, my_auc, "my_auc")
    theirs = results["attacks"]["loss"]["auc"]
    if auc < 0.5 and close(1 - auc, theirs, AUC_TOL):
        fail(task, orientation_hint(auc))
    if not close(auc, theirs, AUC_TOL):
        fail(task, f"your AUC is {auc:.4f}, fedaudit's pooled LOSS AUC is {theirs:.4f}: "
                   "score exactly target.x / target.y with the final global model's oracle, "
                   "labels target.member")
    ok(task, f"your LOSS AUC {auc:.4f} matches fedaudit's {theirs:.4f} (tolerance {AUC_TOL})")


def false_accusations(value, scores, member, population: int) -> None:
    """Task 2.4: expected non-members wrongly flagged at the threshold that catches 80% of
    the members, in a population of ``population`` non-members (``FPR@80%TPR * n``)."""
    from fedaudit.metrics import fpr_at_tpr

    task = "2.4"
    got = as_number(task, value, "false_accusations")
    want = fpr_at_tpr(scores, member, 0.8) * population
    if not close(got, want, 1e-9 * population):  # same ROC, float64: exact
        fail(task, f"you get {got:.1f}, expected {want:.1f}: find the smallest FPR among ROC "
                   "points with TPR >= 0.8, then multiply by the population")
    ok(task, f"{got:.0f} of {population} non-members would be flagged to catch 80% of members")
