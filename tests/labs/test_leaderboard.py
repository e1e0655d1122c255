"""The leaderboard's chance levels (fedaudit.labs.leaderboard): the false-positive budget,
Clopper-Pearson intervals, the exact chance level against random submissions, a seed
where LOSS does not beat chance refused."""

from __future__ import annotations

import math

import numpy as np
import pytest


def test_fp_budget_counts_false_positives_as_the_metrics_do():
    from fedaudit.labs.leaderboard import fp_budget

    # 1% of 2,500 = 25; of 216: 2 (3/216 = 1.4%); 1/100 is exactly 1%; 1/99 is above it
    assert [fp_budget(n) for n in (2500, 216, 100, 99, 1)] == [25, 2, 1, 0, 0]


def test_tpr_interval_is_clopper_pearson():
    from fedaudit.labs.leaderboard import tpr_interval

    # closed forms at the ends: 0 of n -> (0, 1 - (a/2)^(1/n)); n of n -> ((a/2)^(1/n), 1)
    low, high = tpr_interval(0.0, 100)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 100), rel=1e-9)
    low, high = tpr_interval(1.0, 40)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 40), rel=1e-9)


def test_chance_level_matches_random_submissions():
    """The exact negative-hypergeometric chance level against 4,000 random submissions
    graded by fedaudit.metrics (an independent computation: permutations and ROC points)."""
    from fedaudit.labs.leaderboard import chance
    from fedaudit.metrics import tpr_at_fpr

    n1, n0, reps = 300, 700, 4000  # k = 7 false positives at 1% FPR
    c = chance(n1, n0)
    assert c.false_positives == 7
    assert c.tpr_mean == pytest.approx(8 / 701, rel=1e-12)  # (k + 1) / (n0 + 1)
    rng = np.random.default_rng(5)
    member = np.r_[np.ones(n1, int), np.zeros(n0, int)]
    tprs = np.array([tpr_at_fpr(rng.random(n1 + n0), member, 0.01) for _ in range(reps)])
    # the simulated mean within 4 standard errors (exceeded with probability 6e-5)
    assert abs(tprs.mean() - c.tpr_mean) <= 4 * tprs.std() / math.sqrt(reps)
    # p95 is a quantile of a discrete law: P(X <= p95) >= 0.95 > P(X < p95); the simulated
    # shares within 4 binomial standard errors of that
    se = 4 * math.sqrt(0.95 * 0.05 / reps)
    assert np.mean(tprs <= c.tpr_p95 + 1e-12) >= 0.95 - se
    assert np.mean(tprs < c.tpr_p95 - 1e-12) <= 0.95 + se


def test_a_seed_where_loss_does_not_beat_chance_is_refused():
    from fedaudit.labs.challenge import WeakChallengeError, require_beats_chance
    from fedaudit.labs.leaderboard import leaderboard_line

    member = np.r_[np.ones(250, int), np.zeros(2500, int)]
    # LOSS-like scores: members ahead on average, but not at the top (AUC about 0.6)
    rng = np.random.default_rng(3)
    weak = np.r_[rng.normal(0.35, 1, 250), rng.normal(0, 1, 2500)]
    weak[250:275] = 10.0  # the 25 most confident candidates are non-members: TPR@1%FPR 0
    line = leaderboard_line("loss-baseline", weak, member)
    assert line.auc > 0.55 and line.tpr_at_1pct_fpr == 0.0 and not line.tpr_beats_chance
    require_beats_chance(3, line)  # the rank is the AUC: this seed can rank a leaderboard
    noise_line = leaderboard_line("loss-baseline", np.zeros(2750), member)  # AUC 0.5: all tied
    with pytest.raises(WeakChallengeError, match=r"seed 3: the LOSS attack's AUC 0\.\d{4} is "
                                                 r"not above random submissions' 95th"):
        require_beats_chance(3, noise_line)
