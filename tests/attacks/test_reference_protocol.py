"""The audit-grade reference protocol (issue 28): RMIA's tuned ``a`` and LiRA's augmented
queries against independent implementations of Privacy Meter's ``tune_offline_a`` /
``run_rmia`` and the LiRA paper's per-augmentation Gaussians; references of the target's
size on a split disjoint from every audit sample (grid- and driver-trained references
identical: e2e/test_reference_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from attacks.membership.augment import augmented_views
from attacks.membership.lira import lira_scores, lira_scores_augmented
from attacks.membership.rmia_tuning import A_GRID, tune_offline_a
from fedaudit.config import load_scenario

# float64 throughout: a few ulps of the values compared (|values| <= ~10)
TOL = dict(rtol=1e-12, atol=1e-12)
APPROX = dict(rel=1e-12, abs=1e-12)


def _auc(scores, labels):
    """Independent AUC: the Mann-Whitney statistic, ties counting 1/2."""
    s, m = np.asarray(scores), np.asarray(labels, dtype=bool)
    pos, neg = s[m], s[~m]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def _pm_tune_one_out(paired, refs, paired_in, refs_in):
    """Privacy Meter's tune_offline_a with its one OUT model per sample (the case where
    each sample has exactly one OUT reference, so its choice is the only one): run_rmia's
    ``prob_ratio_x`` for a = 0, 0.1, ..., 1, the first a of the largest AUC."""
    out = ~refs_in
    one_out = np.where(out, refs, 0.0).sum(axis=0)  # the single OUT model's signal
    best, best_auc = 0.0, 0.0
    for a in np.arange(0, 1.1, 0.1):
        ratio = paired / ((1 + a) / 2 * one_out + (1 - a) / 2)
        auc = _auc(ratio, paired_in)
        if auc > best_auc:
            best, best_auc = a, auc
    return best, best_auc


def test_tune_offline_a_equals_privacy_meter_with_one_out_model_per_sample():
    rng = np.random.default_rng(3)
    t = 200
    paired_in = np.arange(t) < 100
    # members of the paired reference: higher probability; refs: two models, each sample
    # OUT for exactly one of them
    paired = np.clip(np.where(paired_in, 0.7, 0.45) + rng.normal(0, 0.15, t), 0.01, 0.99)
    refs = np.clip(0.5 + rng.normal(0, 0.2, (2, t)), 0.01, 0.99)
    refs_in = np.zeros((2, t), dtype=bool)
    refs_in[0, ::2] = True
    refs_in[1, 1::2] = True
    a, aucs = tune_offline_a(paired, refs, paired_in, refs_in)
    want_a, want_auc = _pm_tune_one_out(paired, refs, paired_in, refs_in)
    assert a == pytest.approx(want_a, abs=1e-12)
    assert aucs[a] == pytest.approx(want_auc, **APPROX)
    assert tuple(aucs) == A_GRID == tuple(round(0.1 * i, 1) for i in range(11))
    # a changes the ranking only through the per-sample affine p(x): the scores are those
    # of run_rmia, p_paired / (((1 + a) / 2) mean_OUT + (1 - a) / 2)
    for g in (0.0, 0.3, 1.0):
        ratio = paired / ((1 + g) / 2 * np.where(~refs_in, refs, 0).sum(0) + (1 - g) / 2)
        assert aucs[g] == pytest.approx(_auc(ratio, paired_in), **APPROX)


def test_tune_offline_a_means_over_every_out_reference_and_drops_uncovered_samples():
    paired = np.array([0.9, 0.8, 0.3, 0.2, 0.6])
    refs = np.array([[0.5, 0.1, 0.4, 0.3, 0.9], [0.7, 0.3, 0.2, 0.5, 0.1]])
    refs_in = np.array([[0, 0, 1, 0, 1], [0, 1, 0, 0, 1]], dtype=bool)  # sample 4: no OUT
    paired_in = np.array([1, 1, 0, 0, 1], dtype=bool)
    _, aucs = tune_offline_a(paired, refs, paired_in, refs_in)
    mean_out = np.array([0.6, 0.1, 0.2, 0.4])  # OUT means of samples 0-3
    for g in A_GRID:
        ratio = paired[:4] / ((1 + g) / 2 * mean_out + (1 - g) / 2)
        assert aucs[g] == pytest.approx(_auc(ratio, paired_in[:4]), **APPROX)
    with pytest.raises(ValueError, match="members and non-members"):
        tune_offline_a(paired, refs, np.ones(5, dtype=bool), refs_in)


def test_lira_augmented_is_the_mean_of_one_gaussian_per_augmentation():
    """The LiRA paper's code: per augmentation a Gaussian over the references' statistic
    of that view; the sample's score the mean over views of the per-view log LR."""
    rng = np.random.default_rng(0)
    a_views, r, n = 3, 6, 5
    ref = rng.normal(0, 1, (a_views, r, n)) + np.arange(a_views)[:, None, None]
    tgt = rng.normal(0.5, 1, (a_views, n))
    in_mask = np.zeros((r, n), dtype=bool)
    in_mask[:3] = True
    got_on = lira_scores_augmented(tgt, ref, in_mask, fixed_variance=False)
    got_off = lira_scores_augmented(tgt, ref, None, fixed_variance=False)
    want_on, want_off = np.zeros(n), np.zeros(n)
    for v in range(a_views):
        i, o = ref[v, :3], ref[v, 3:]
        want_on += (norm.logpdf(tgt[v], i.mean(0), i.std(0)) -
                    norm.logpdf(tgt[v], o.mean(0), o.std(0))) / a_views
        want_off += norm.logcdf(tgt[v], ref[v].mean(0), ref[v].std(0)) / a_views
    np.testing.assert_allclose(got_on, want_on, **TOL)
    np.testing.assert_allclose(got_off, want_off, **TOL)
    # one view is plain LiRA
    np.testing.assert_allclose(lira_scores_augmented(tgt[:1], ref[:1], in_mask),
                               lira_scores(tgt[0], ref[0], in_mask), **TOL)


def test_augmented_views_flip_and_shift_explicitly():
    x = np.arange(2 * 1 * 3 * 4, dtype=np.float32).reshape(2, 1, 3, 4)
    assert len(augmented_views(x, "none")) == 1
    views = augmented_views(x, "flip")
    np.testing.assert_array_equal(views[1][0, 0, 0], [3, 2, 1, 0])
    views = augmented_views(x, "flip+shift")
    assert len(views) == 10
    np.testing.assert_array_equal(views[0], x)
    right = views[2]  # shifted 2 columns to the right, zero fill on the left
    np.testing.assert_array_equal(right[0, 0, 0], [0, 0, 0, 1])
    down = views[4]  # shifted 2 rows down
    np.testing.assert_array_equal(down[0, 0, 2], x[0, 0, 0])
    np.testing.assert_array_equal(down[0, 0, :2], np.zeros((2, 4)))
    with pytest.raises(ValueError, match="needs images"):
        augmented_views(np.zeros((3, 5)), "flip")


# ------------------------------------------------------------------ the split and sizes

def _scenario(*sets):
    return load_scenario("quickstart", ["federation.rounds=2", "federation.num_clients=3",
                                        "data.max_samples=600", "data.holdout_fraction=0.45",
                                        "data.test_fraction=0.3", "train.local_epochs=1",
                                        "attack.methods=['loss','lira','rmia']",
                                        "attack.reference.models=4", *sets])


def _plan(s):
    from fedaudit.audit.reference_models import attack_split, plan_references, target_train_size
    from fedaudit.audit.sets import PooledAuditSet, attack_sets
    from fedaudit.data import build_federated_data

    d = build_federated_data(s)
    split = attack_split(s, d)
    audit = PooledAuditSet(tuple(attack_sets(s, d, split.nonmember_pool)))
    return d, split, audit, plan_references(s, d, split, audit.ids), target_train_size(d)


@pytest.mark.parametrize("mode", ["offline", "online"])
def test_references_train_on_the_targets_size_apart_from_audit_and_population(mode):
    s = _scenario(f"attack.reference.mode={mode}")
    d, split, audit, plan, n_target = _plan(s)
    assert n_target == sum(len(c) for c in d.clients) == len(d.train)
    assert plan.sizes.parity and plan.sizes.shortfall() is None
    assert [len(t) for t in plan.train_ids] == [n_target] * 4
    members = set(d.train)
    assert not set(split.population) & set(split.nonmember_pool)
    assert set(split.population) | set(split.nonmember_pool) == set(d.holdout)
    for k, ids in enumerate(plan.train_ids):
        assert len(set(ids)) == len(ids)
        assert not set(ids) & set(split.population)
        assert not set(ids) & members - set(audit.ids)  # never the target's unaudited data
        if mode == "offline":
            assert not set(ids) & set(audit.ids)
        else:
            assert set(ids) & set(audit.ids) == set(audit.ids[plan.in_mask[k]])
    if mode == "online":  # every audit sample IN for exactly half of the references
        assert np.all(plan.in_mask.sum(axis=0) == 2)


def test_more_references_keep_the_first_ones():
    """Reference k's data and seed do not depend on how many references there are, so a
    16-reference run reuses a 4-reference run's cache (online: complementary pairs)."""
    for mode in ("offline", "online"):
        small = _plan(_scenario(f"attack.reference.mode={mode}"))[3]
        big = _plan(_scenario(f"attack.reference.mode={mode}", "attack.reference.models=8"))[3]
        assert big.seeds[:4] == small.seeds
        for a, b in zip(small.train_ids, big.train_ids):
            np.testing.assert_array_equal(a, b)


def test_a_pool_too_small_refuses_before_training_unless_allowed():
    from fedaudit.config.preflight import check_scenario
    from fedaudit.errors import ScenarioError

    tight = ["data.holdout_fraction=0.3", "data.test_fraction=0.1"]
    with pytest.raises(ScenarioError) as exc:
        check_scenario(_scenario(*tight))
    msg = str(exc.value)
    assert "\n" not in msg and "the target on" in msg and "allow_smaller" in msg
    s = _scenario(*tight, "attack.reference.allow_smaller=true")
    check_scenario(s)
    plan = _plan(s)[3]
    assert not plan.sizes.parity and max(plan.sizes.per_reference) < plan.sizes.target
