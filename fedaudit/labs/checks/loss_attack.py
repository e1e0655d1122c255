"""Checks of lab 2, membership inference by hand (the LOSS attack, ROC, low FPR).

The toy cases are built so that each mistake the lab warns about gives a wrong answer:

* 2.1: a row with ``p_y = 0``, so a log without a guard returns ``-inf``; a row whose
  most probable class is not its label, so ``p_max`` instead of ``p_y`` differs;
* 2.2 (200 members, 200 non-members each, so 1% FPR is 2 false positives):
  ``_TIED`` has a block of tied scores (3 non-members, 30 members) that takes the ROC from
  FPR 0.5% straight to 2%: interpolating at 1% (``np.interp``) gives 0.15 and the first
  point beyond 1% (``tpr[np.searchsorted(fpr, 0.01)]``) 0.25, where the largest TPR at
  FPR <= 1% is 0.10; ``_EXACT`` has a ROC point at exactly FPR 1% (2 of 200) above every
  point below it: a strict ``fpr < 0.01`` gives 0.15 where the answer is 0.20.
"""

from __future__ import annotations

import numpy as np

from fedaudit.labs.checks import (AUC_TOL, as_array, as_number, call, close, direction, fail,
                                  ok, orientation_hint, same_values)
from fedaudit.labs.leaderboard import chance

#: a hand-made case: four samples, three classes; row 1's argmax is not its label, row 3
#: gives its label probability 0
_PROBA = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.25, 0.5, 0.25], [0.0, 1.0, 0.0]])
_Y = np.array([0, 1, 1, 0])


def loss_scores(fn) -> None:
    """Task 2.1: ``fn(proba, y)`` is ``log p_y`` (= -cross-entropy, higher = member), with
    the log guarded so that ``p_y = 0`` gives a finite score below every other one."""
    task = "2.1"
    with np.errstate(divide="ignore", invalid="ignore"):  # the unguarded log: reported below
        out = call(task, fn, _PROBA.copy(), _Y.copy())
    got = as_array(task, out, "loss_scores(proba, y)", shape=(4,), finite=False)
    p_y = _PROBA[np.arange(4), _Y]
    first = got[:3]  # rows with p_y > 0: any finite log agrees there
    if not np.isfinite(first).all():
        fail(task, "your scores hold NaN or infinite values: take the log of p_y, each "
                   "row's probability of its TRUE label")
    want = np.log(p_y[:3])  # log 0.7, log 0.1, log 0.5
    if np.allclose(first, -want, atol=1e-12, rtol=0):
        fail(task, "you return the loss itself (positive for a low p_y); the attack's score "
                   "must be higher for members, who have a LOW loss: return -loss = log p_y")
    if np.allclose(first, p_y[:3], atol=1e-12, rtol=0):
        fail(task, "you return p_y (the confidence attack); the LOSS score is its log")
    if np.allclose(first, np.log(_PROBA[:3].max(axis=1)), atol=1e-12, rtol=0):
        fail(task, "you take the log of the LARGEST probability of each row; the loss is "
                   "about the TRUE label: proba[np.arange(len(y)), y]")
    # float64 logs of the same numbers: agreement to a few ulps
    same_values(task, first, want, "loss_scores", 1e-12,
                "use the probability of the TRUE label y of each row, then take its log")
    if not np.isfinite(got[3]):
        fail(task, "a sample with p_y = 0 gets a score of log 0 = -inf (or NaN): guard the "
                   "log (np.log(np.maximum(p_y, 1e-30))) so that every score is finite")
    if not got[3] < first.min():
        fail(task, "the sample with p_y = 0 must get the LOWEST score (the log of a tiny "
                   "guard such as 1e-30), not one above samples the model finds likelier")
    ok(task, "loss_scores(proba, y) = log p_y, oriented higher = member, guarded at p_y = 0")


def _toy(blocks: list[tuple[int, int]], n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Scores from the top down: each block ``(members, nonmembers)`` shares one score;
    the remaining samples get distinct low scores (no ties, members above on average)."""
    scores, member = [], []
    for level, (m, nm) in enumerate(blocks):
        scores += [100.0 - level] * (m + nm)
        member += [1] * m + [0] * nm
    m_left = n - sum(b[0] for b in blocks)
    nm_left = n - sum(b[1] for b in blocks)
    scores += list(np.linspace(-3.0, 5.0, m_left) + 0.001) + list(np.linspace(-4.0, 4.0, nm_left))
    member += [1] * m_left + [0] * nm_left
    return np.asarray(scores), np.asarray(member)


#: a tie straddles 1% FPR: (0, .10) -> (.005, .10) -> tie -> (.02, .25)
_TIED = _toy([(20, 0), (0, 1), (30, 3)])
#: a ROC point at exactly 1% FPR: (.005, .15) -> (.01, .15) -> (.01, .20) -> (.015, .20)
_EXACT = _toy([(20, 0), (0, 1), (10, 0), (0, 1), (10, 0), (0, 1)])


def _mistakes(scores: np.ndarray, member: np.ndarray) -> dict[str, float]:
    """What the warned-about mistakes return on a toy case, keyed by the concept."""
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(member, scores, drop_intermediate=False)
    return {
        "interpolation": float(np.interp(0.01, fpr, tpr)),
        "strict": float(tpr[fpr < 0.01].max()),
        "first point beyond": float(tpr[min(np.searchsorted(fpr, 0.01, side="right"),
                                            len(tpr) - 1)]),
    }


_MISTAKE_HINTS = {
    "interpolation": "you interpolate between two ROC points; a point between two "
                     "thresholds is not an attack anyone can run: take the largest tpr "
                     "among the ROC points with fpr <= 0.01 (no interpolation)",
    "strict": "the ROC point at exactly 1% FPR counts: fpr <= 0.01, not fpr < 0.01",
    "first point beyond": "you take the first ROC point whose FPR is ABOVE 1% (an "
                          "off-by-one index: np.searchsorted returns the insertion point); "
                          "take the largest tpr among the points with fpr <= 0.01",
}


def _tpr_of(task: str, fn, scores: np.ndarray, member: np.ndarray) -> tuple[float, float]:
    out = call(task, fn, scores.copy(), member.copy())
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        fail(task, "return a pair (auc, tpr_at_1pct_fpr)")
    return as_number(task, out[0], "auc"), as_number(task, out[1], "tpr_at_1pct_fpr")


def roc_summary(fn, scores, member) -> None:
    """Task 2.2: ``fn(scores, member)`` returns ``(auc, tpr_at_1pct_fpr)`` computed with
    scikit-learn, equal to :func:`fedaudit.metrics.membership_metrics`, on ``scores,
    member`` and on the two toy cases of the module docstring."""
    from fedaudit.metrics import membership_metrics

    task = "2.2"
    scores, member = np.asarray(scores), np.asarray(member)
    for name, (s, mm) in (("the toy scores", (scores, member)), ("a toy case with a tie "
                          "across 1% FPR", _TIED), ("a toy case with a ROC point at exactly "
                          "1% FPR", _EXACT)):
        auc, tpr = _tpr_of(task, fn, s, mm)
        m = membership_metrics(s, mm)
        # same scores, same float64 ROC arithmetic: exact up to summation order
        if not close(auc, m["auc"], 1e-12):
            if close(auc, 1 - m["auc"], 1e-12):
                fail(task, orientation_hint(auc) + " -- or you passed (scores, member) to "
                           "roc_auc_score in the wrong order: it takes (y_true, y_score)")
            fail(task, f"on {name} your AUC is {direction(auc, m['auc'])}: use "
                       "sklearn.metrics.roc_auc_score(member, scores)")
        want = m["tpr_at_1pct_fpr"]
        if not close(tpr, want, 1e-12):
            for mistake, value in _mistakes(s, mm).items():
                if close(tpr, value, 1e-12) and not close(value, want, 1e-12):
                    fail(task, f"on {name}: {_MISTAKE_HINTS[mistake]}")
            fail(task, f"on {name} your TPR at 1% FPR is {direction(tpr, want)}: take "
                       "roc_curve(member, scores) and the LARGEST tpr among points with "
                       "fpr <= 0.01 (no interpolation)")
    ok(task, "AUC and TPR@1%FPR right, also where scores tie across 1% FPR and where a "
             "ROC point sits exactly at 1% FPR")


def _pooled_sizes(results: dict) -> tuple[int, int]:
    n1 = sum(c["attack_set"]["members"] for c in results["clients"])
    n0 = int(round(1.0 / results["attacks"]["loss"]["min_fpr_resolution"]))
    return n1, n0


def matches_fedaudit(my_auc, results: dict, my_tpr=None) -> None:
    """Task 2.3: the student's LOSS AUC and TPR at 1% FPR on the target equal fedaudit's
    pooled ones.  A score within ``SCORE_TOL`` can swap two near-tied samples: at most a
    handful of pairs in the AUC (``AUC_TOL``), and at the 1%-FPR threshold each swap moves
    the TPR by one member: 2 / n_members."""
    task = "2.3"
    auc = as_number(task, my_auc, "my_auc")
    theirs = results["attacks"]["loss"]["auc"]
    if auc < 0.5 and close(1 - auc, theirs, AUC_TOL):
        fail(task, orientation_hint(auc))
    if not close(auc, theirs, AUC_TOL):
        fail(task, f"your AUC {auc:.4f} is {direction(auc, theirs)} for fedaudit's pooled "
                   "LOSS attack on the same samples: score exactly target.x / target.y with "
                   "the final global model's oracle, labels target.member")
    if my_tpr is None:
        ok(task, f"your LOSS AUC {auc:.4f} matches fedaudit's (tolerance {AUC_TOL})")
        return
    tpr = as_number(task, my_tpr, "my_tpr")
    n1, n0 = _pooled_sizes(results)
    want = results["attacks"]["loss"]["tpr_at_1pct_fpr"]
    if not close(tpr, want, 2.0 / n1):
        fail(task, f"your TPR at 1% FPR is {direction(tpr, want)} for fedaudit's pooled LOSS "
                   "attack: compute it with your roc_summary on the same scores (largest "
                   "tpr with fpr <= 0.01)")
    c = chance(n1, n0)
    ok(task, f"your LOSS AUC {auc:.4f} and TPR@1%FPR {tpr:.3f} match fedaudit's; random "
             f"scores reach TPR@1%FPR {c.tpr_mean:.3f} on average ({c.tpr_p95:.3f} at their "
             f"95th percentile) with {n0} non-members ({c.false_positives} false positives "
             "allowed)")


def false_accusations(value, scores, member, population: int) -> None:
    """Task 2.4: expected non-members wrongly flagged at the threshold that catches 80% of
    the members, in a population of ``population`` non-members (``FPR@80%TPR * n``)."""
    from sklearn.metrics import roc_curve

    from fedaudit.metrics import fpr_at_tpr

    task = "2.4"
    got = as_number(task, value, "false_accusations")
    want = fpr_at_tpr(scores, member, 0.8) * population
    if not close(got, want, 1e-9 * population):  # same ROC, float64: exact
        fpr, tpr, _ = roc_curve(member, scores, drop_intermediate=False)
        if close(got, float(fpr[tpr > 0.8].min()) * population, 1e-9 * population):
            fail(task, "the ROC point at exactly 80% TPR counts: tpr >= 0.8, not tpr > 0.8")
        if close(got, (1 - fpr_at_tpr(scores, member, 0.8)) * population, 1e-9 * population):
            fail(task, "you count the non-members NOT flagged: the false accusations are "
                       "FPR x population")
        fail(task, f"your count is {direction(got, want)}: find the smallest FPR among ROC "
                   "points with TPR >= 0.8 (roc_curve with drop_intermediate=False), then "
                   "multiply by the population")
    ok(task, f"{got:.0f} of {population} non-members would be flagged to catch 80% of members")
