"""fedaudit.metrics against hand-computed ROC cases."""

from __future__ import annotations

import numpy as np
import pytest

from fedaudit.metrics import fpr_at_tpr, membership_metrics, roc_points, tpr_at_fpr


def _split(member_scores, nonmember_scores):
    scores = np.concatenate([member_scores, nonmember_scores]).astype(float)
    members = np.r_[np.ones(len(member_scores), int), np.zeros(len(nonmember_scores), int)]
    return scores, members


def test_perfect_separation():
    scores, members = _split([3.0, 4.0, 5.0], [0.0, 1.0, 2.0])
    m = membership_metrics(scores, members)
    assert m["auc"] == 1.0
    assert m["tpr_at_1pct_fpr"] == 1.0
    assert m["tpr_at_0p1pct_fpr"] == 1.0
    assert m["fpr_at_80pct_tpr"] == 0.0
    assert (m["n_members"], m["n_nonmembers"]) == (3, 3)
    assert m["min_fpr_resolution"] == pytest.approx(1 / 3)


def test_reversed_scores():
    scores, members = _split([0.0, 1.0, 2.0], [3.0, 4.0, 5.0])
    m = membership_metrics(scores, members)
    assert m["auc"] == 0.0
    assert m["tpr_at_1pct_fpr"] == 0.0  # only the origin has FPR <= 1%
    assert m["fpr_at_80pct_tpr"] == 1.0


def test_all_scores_tied():
    scores = np.full(10, 0.3)
    members = np.r_[np.ones(4), np.zeros(6)]
    m = membership_metrics(scores, members)
    assert m["auc"] == 0.5
    fpr, tpr = roc_points(scores, members)
    np.testing.assert_array_equal(fpr, [0.0, 1.0])
    np.testing.assert_array_equal(tpr, [0.0, 1.0])
    assert m["tpr_at_1pct_fpr"] == 0.0
    assert m["fpr_at_80pct_tpr"] == 1.0


def test_partial_ties_by_hand():
    # members 0.9, 0.5, 0.5, 0.2 vs non-members 0.5, 0.3, 0.1, 0.1.
    # Pairs (member > non-member = 1, tie = 1/2): 0.9 -> 4; each 0.5 -> 0.5 + 3 = 3.5;
    # 0.2 -> 2. AUC = (4 + 7 + 2) / 16 = 13/16.
    # ROC by threshold: >=0.9 (0, 1/4); >=0.5 (1/4, 3/4); >=0.3 (1/2, 3/4);
    # >=0.2 (1/2, 1); >=0.1 (1, 1).
    scores, members = _split([0.9, 0.5, 0.5, 0.2], [0.5, 0.3, 0.1, 0.1])
    m = membership_metrics(scores, members)
    assert m["auc"] == pytest.approx(13 / 16)
    fpr, tpr = roc_points(scores, members)
    np.testing.assert_allclose(fpr, [0, 0, 0.25, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(tpr, [0, 0.25, 0.75, 0.75, 1.0, 1.0])
    assert m["tpr_at_1pct_fpr"] == 0.25
    assert m["fpr_at_80pct_tpr"] == 0.5  # (1/4, 3/4) does not reach 80%
    assert tpr_at_fpr(scores, members, 0.25) == 0.75
    assert tpr_at_fpr(scores, members, 0.49) == 0.75
    assert fpr_at_tpr(scores, members, 0.75) == 0.25


def test_fpr_at_80pct_tpr_by_hand():
    # 4 of 5 members (TPR 0.8) need the threshold down to 4, which admits 7, 6, 5.
    scores, members = _split([10, 9, 8, 4, 2], [7, 6, 5, 3, 1])
    m = membership_metrics(scores, members)
    assert m["fpr_at_80pct_tpr"] == pytest.approx(3 / 5)
    assert m["tpr_at_1pct_fpr"] == pytest.approx(3 / 5)  # 10, 9, 8 above every non-member
    # 10, 9, 8 beat all 5; 4 beats 3 and 1; 2 beats 1.
    assert m["auc"] == pytest.approx((15 + 2 + 1) / 25)


def test_low_fpr_resolution_edge():
    # 50 non-members: the smallest non-zero FPR is 1/50 = 2% > 1%, so "TPR at FPR <= 1%"
    # is the TPR at FPR = 0. Here it is 0.2, although FPR = 2% already buys TPR = 1:
    # interpolating or taking the nearest point would wrongly report 0.6 or 1.0.
    nonmembers = np.arange(50, dtype=float)  # top non-member scores 49
    members = np.r_[np.arange(100, 110, dtype=float), np.full(40, 48.5)]
    scores, labels = _split(members, nonmembers)
    m = membership_metrics(scores, labels)
    assert m["min_fpr_resolution"] == pytest.approx(0.02)
    assert m["tpr_at_1pct_fpr"] == pytest.approx(0.2)
    assert m["tpr_at_0p1pct_fpr"] == pytest.approx(0.2)
    assert tpr_at_fpr(scores, labels, 0.02) == pytest.approx(1.0)
    assert m["fpr_at_80pct_tpr"] == pytest.approx(0.02)


def test_bound_equal_to_a_grid_point_is_included():
    # 100 non-members: FPR = 1/100 must count as "<= 1%" (exact comparison, no epsilon).
    nonmembers = np.arange(100, dtype=float)  # top non-member 99
    members = np.r_[np.full(3, 200.0), np.full(2, 99.0), np.full(5, -1.0)]
    scores, labels = _split(members, nonmembers)
    m = membership_metrics(scores, labels)
    assert m["tpr_at_1pct_fpr"] == pytest.approx(0.5)  # (1/100, 5/10) qualifies
    assert m["tpr_at_0p1pct_fpr"] == pytest.approx(0.3)


def test_auc_matches_pairwise_count_with_ties():
    rng = np.random.default_rng(7)
    scores = rng.integers(0, 6, size=60).astype(float)  # many ties
    members = rng.integers(0, 2, size=60)
    pos, neg = scores[members == 1], scores[members == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert membership_metrics(scores, members)["auc"] == pytest.approx(wins / (pos.size * neg.size))


def test_roc_points_shape_and_monotone():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=40)
    members = np.r_[np.ones(15), np.zeros(25)]
    fpr, tpr = roc_points(scores, members)
    assert fpr[0] == 0 and tpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert fpr.size == 41  # drop_intermediate=False: one point per distinct score + origin


def test_bool_members_same_as_int():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=30)
    members = rng.integers(0, 2, size=30)
    assert membership_metrics(scores, members.astype(bool)) == membership_metrics(scores, members)


def test_metrics_are_plain_python_numbers():
    scores, members = _split([0.9, 0.4], [0.5, 0.1])
    for key, value in membership_metrics(scores, members).items():
        assert type(value) in (int, float), key


@pytest.mark.parametrize(
    ("scores", "members", "match"),
    [
        ([0.1, 0.2, 0.3], [1, 0], "same length"),
        ([0.1, 0.2, 0.3], [1, 1, 1], "both classes"),
        ([0.1, 0.2, 0.3], [0, 0, 0], "both classes"),
        ([], [], "both classes"),
        ([0.1, np.nan, 0.3], [1, 0, 1], "scores must be finite"),
        ([0.1, np.inf, 0.3], [1, 0, 1], "scores must be finite"),
        ([0.1, 0.2, 0.3], [1, 0, 2], "members must hold only 0 and 1"),
        ([0.1, 0.2, 0.3], [1, 0, 0.5], "members must hold only 0 and 1"),
        ([0.1, 0.2, 0.3], [1, 0, -1], "members must hold only 0 and 1"),
        ([0.1, 0.2, 0.3], ["1", "0", "1"], "members must hold 0/1"),
        ([[0.1], [0.2]], [1, 0], "scores must be 1-D"),
        ([0.1, 0.2], [[1], [0]], "members must be 1-D"),
        (["a", "b"], [1, 0], "scores must be real numbers"),
    ],
)
def test_validation_errors(scores, members, match):
    with pytest.raises(ValueError, match=match):
        membership_metrics(scores, members)
    with pytest.raises(ValueError, match=match):
        roc_points(scores, members)


def test_rate_bounds_validated():
    scores, members = _split([1.0], [0.0])
    with pytest.raises(ValueError, match="max_fpr"):
        tpr_at_fpr(scores, members, 1.5)
    with pytest.raises(ValueError, match="min_tpr"):
        fpr_at_tpr(scores, members, -0.1)
