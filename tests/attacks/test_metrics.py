"""fedaudit.metrics against hand-computed ROC cases, and bit for bit against scikit-learn."""

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


# ---- bit for bit against scikit-learn --------------------------------------------------
# fedaudit.metrics computes the ROC and AUC in numpy, mirroring scikit-learn (see its
# docstring); results.json must not change by a single bit, so every value is held equal to
# scikit-learn called directly on the raw inputs: same bits, not approximately.

def _random_size(rng) -> int:
    return int(np.exp(rng.uniform(np.log(2), np.log(5000))))  # log-uniform in [2, 5000]


def _members(rng, n: int, p: float) -> np.ndarray:
    """0/1 labels with member rate ``p``, both classes present."""
    m = (rng.random(n) < p).astype(np.int64)
    i, j = rng.choice(n, size=2, replace=False)
    m[i], m[j] = 1, 0
    return m


def _case(family: str, rng):
    n = _random_size(rng)
    p = rng.uniform(0.02, 0.98)
    if family == "continuous":
        return rng.normal(size=n), _members(rng, n, p)
    if family == "integer_ties":  # heavy ties: int scores in a small range
        return rng.integers(0, rng.integers(1, 7), size=n), _members(rng, n, p)
    if family == "float_ties":  # rounded floats, with 0.0 and -0.0 both present
        s = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
        s[rng.random(n) < 0.1] = -0.0
        return s, _members(rng, n, p)
    if family == "float32":
        s = rng.normal(size=n).astype(np.float32)
        if rng.random() < 0.5:
            s = np.round(s, 1)
        return s, _members(rng, n, p)
    if family == "int8_scores":
        return rng.integers(-3, 3, size=n).astype(np.int8), _members(rng, n, p)
    if family == "all_tied":
        return np.full(n, rng.normal()), _members(rng, n, p)
    if family == "one_member":
        m = np.zeros(n, np.int64)
        m[rng.integers(n)] = 1
        s = rng.integers(0, 4, size=n).astype(float) if rng.random() < 0.5 else rng.normal(size=n)
        return s, m
    if family == "one_nonmember":
        m = np.ones(n, np.int64)
        m[rng.integers(n)] = 0
        return rng.normal(size=n), m
    if family == "extreme_imbalance":
        n = int(rng.integers(500, 5001))
        p = 0.002 if rng.random() < 0.5 else 0.998
        return np.round(rng.normal(size=n) + rng.normal(), 2), _members(rng, n, p)
    if family == "bool_members":
        return rng.normal(size=n), _members(rng, n, p).astype(bool)
    if family == "separated":  # AUC near 0 or 1: members shifted up or down
        m = _members(rng, n, p)
        return rng.normal(size=n) + rng.choice([-8.0, 8.0]) * m, m
    raise AssertionError(family)


def _bits(x) -> bytes:
    return np.asarray(x, dtype=np.float64).tobytes()


FAMILIES = ("continuous", "integer_ties", "float_ties", "float32", "int8_scores", "all_tied",
            "one_member", "one_nonmember", "extreme_imbalance", "bool_members", "separated")


@pytest.mark.parametrize("family", FAMILIES)
def test_bit_identical_to_sklearn(family):
    from sklearn.metrics import roc_auc_score, roc_curve

    rng = np.random.default_rng(sum(map(ord, family)))
    sizes = set()
    for case in range(250):
        scores, members = _case(family, rng)
        sizes.add(scores.size)
        where = f"{family} case {case} (n={scores.size})"
        ref_fpr, ref_tpr, _ = roc_curve(members, scores, drop_intermediate=False)
        fpr, tpr = roc_points(scores, members)
        assert fpr.dtype == tpr.dtype == ref_fpr.dtype == np.float64, where
        assert fpr.tobytes() == ref_fpr.tobytes() and tpr.tobytes() == ref_tpr.tobytes(), where

        got = membership_metrics(scores, members)
        n_pos = int(np.sum(members))
        n_neg = members.size - n_pos
        ref = {
            "auc": float(roc_auc_score(members, scores)),
            "tpr_at_1pct_fpr": float(ref_tpr[ref_fpr <= 0.01].max()),
            "tpr_at_0p1pct_fpr": float(ref_tpr[ref_fpr <= 0.001].max()),
            "fpr_at_80pct_tpr": float(ref_fpr[ref_tpr >= 0.8].min()),
            "n_members": n_pos,
            "n_nonmembers": n_neg,
            "min_fpr_resolution": 1.0 / n_neg,
        }
        assert got == ref, where
        assert {k: _bits(v) for k, v in got.items()} == {k: _bits(v) for k, v in ref.items()}, \
            where
        assert all(type(got[k]) is type(ref[k]) for k in ref), where
        if case % 10 == 0:
            for b in (0.0, 0.05, 0.25, 0.5, 1.0):
                want_tpr, want_fpr = ref_tpr[ref_fpr <= b].max(), ref_fpr[ref_tpr >= b].min()
                assert _bits(tpr_at_fpr(scores, members, b)) == _bits(want_tpr), where
                assert _bits(fpr_at_tpr(scores, members, b)) == _bits(want_fpr), where
    assert (min(sizes) < 10 and max(sizes) > 1000) or family == "extreme_imbalance"


def test_bit_identical_to_sklearn_at_the_size_limits():
    from sklearn.metrics import roc_auc_score, roc_curve

    rng = np.random.default_rng(5)
    for scores, members in [([0.3, 0.7], [1, 0]), ([0.3, 0.3], [0, 1]), ([1, 2], [True, False]),
                            (rng.normal(size=5000), rng.integers(0, 2, 5000)),
                            (rng.integers(0, 3, 5000), rng.integers(0, 2, 5000)),
                            (rng.normal(size=100_000), rng.integers(0, 2, 100_000))]:
        fpr, tpr, _ = roc_curve(members, scores, drop_intermediate=False)
        ours = roc_points(scores, members)
        assert ours[0].tobytes() == fpr.tobytes() and ours[1].tobytes() == tpr.tobytes()
        auc = membership_metrics(scores, members)["auc"]
        assert _bits(auc) == _bits(roc_auc_score(members, scores))
