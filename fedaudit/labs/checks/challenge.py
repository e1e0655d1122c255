"""Checks of lab 8, the capstone challenge."""

from __future__ import annotations

import math

import numpy as np

from fedaudit.labs.checks import as_array, fail, ok
from fedaudit.labs.todo import require


def null_auc_sd(n_members: int, n_nonmembers: int) -> float:
    """Standard deviation of the AUC of scores independent of membership (no ties): the
    Mann-Whitney U statistic's null variance ``n1 n0 (n1 + n0 + 1) / 12``, divided by
    ``(n1 n0)^2``."""
    return math.sqrt((n_members + n_nonmembers + 1) / (12.0 * n_members * n_nonmembers))


def scores_shape(scores, challenge) -> None:
    """Task 8.1: one finite score per candidate."""
    as_array("8.1", scores, "scores", shape=(len(challenge.id),))
    ok("8.1", f"{len(challenge.id)} finite scores")


def beats_chance(grade, z_min: float = 3.0) -> None:
    """Task 8.2: the graded AUC is above chance by ``z_min`` null standard deviations (a
    one-sided test at about 0.1% for z = 3, normal approximation of Mann-Whitney)."""
    task = "8.2"
    require(grade, task)
    sd = null_auc_sd(grade.n_members, grade.n_nonmembers)
    z = (grade.auc - 0.5) / sd
    if grade.auc < 0.5 - z_min * sd:
        fail(task, f"your AUC is {grade.auc:.3f}: is your score oriented so that higher "
                   "means member?")
    if z < z_min:
        fail(task, f"your AUC {grade.auc:.3f} is only {z:.1f} standard deviations above "
                   f"chance (sd {sd:.3f} for {grade.n_members} members and "
                   f"{grade.n_nonmembers} non-members); aim for {z_min:g}: try the LOSS or "
                   "modified-entropy score of the true label")
    ok(task, f"AUC {grade.auc:.3f} ({z:.1f} sd above chance), TPR@1%FPR "
             f"{grade.tpr_at_1pct_fpr:.3f}; leaderboard line: {grade.csv_line()}")
