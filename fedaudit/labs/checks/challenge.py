"""Checks of lab 8, the capstone challenge."""

from __future__ import annotations

from fedaudit.labs.checks import as_array, fail, ok
from fedaudit.labs.leaderboard import null_auc_sd
from fedaudit.labs.todo import require

__all__ = ["beats_chance", "null_auc_sd", "scores_shape"]


def scores_shape(scores, challenge) -> None:
    """Task 8.1: one finite score per candidate."""
    as_array("8.1", scores, "scores", shape=(len(challenge.id),))
    ok("8.1", f"{len(challenge.id)} finite scores")


def beats_chance(grade, z_min: float = 3.0) -> None:
    """Task 8.2: the graded AUC (the leaderboard's rank) is above chance by ``z_min`` null
    standard deviations (a one-sided test at about 0.1% for z = 3, normal approximation of
    Mann-Whitney); the ok line reports TPR at 1% FPR beside its chance level
    (:mod:`fedaudit.labs.leaderboard`)."""
    task = "8.2"
    require(grade, task)
    sd = null_auc_sd(grade.n_members, grade.n_nonmembers)
    z = (grade.auc - 0.5) / sd
    if grade.auc < 0.5 - z_min * sd:
        fail(task, f"your AUC is {grade.auc:.3f}: is your score oriented so that higher "
                   "means member? (an AUC below 0.5 is a reversed score: negate it)")
    if z < z_min:
        fail(task, f"your AUC {grade.auc:.3f} is only {z:.1f} standard deviations above "
                   f"chance (sd {sd:.3f} for {grade.n_members} members and "
                   f"{grade.n_nonmembers} non-members); aim for {z_min:g}: try the LOSS or "
                   "modified-entropy score of the true label")
    ok(task, grade.summary())
