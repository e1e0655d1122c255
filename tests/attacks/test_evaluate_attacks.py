"""The attack registry, the sampling of members and non-members, and evaluate_attacks:
queries, time, metrics and what an attack reports."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attacks import ATTACKS, Oracle, get_attack, register_attack
from attacks.membership import (AttackOutcome, NonmemberSample, evaluate_attacks, sample_members, sample_nonmembers)
from attacks.membership.registry import AttackScores
from fedaudit.metrics import MembershipMetrics, membership_metrics

from tests.attacks.stubs import BUILTIN, LookupModel, P, Y, index_inputs, small_cnn


# --------------------------------------------------------------------------- registry


def test_registry_has_builtin_attacks():
    assert set(BUILTIN) <= set(ATTACKS)
    for name in BUILTIN:
        assert get_attack(name) is ATTACKS[name]


def test_get_attack_unknown_lists_allowed_names():
    with pytest.raises(ValueError, match="unknown attack 'nope'; allowed: .*confidence.*resmia"):
        get_attack("nope")


def test_register_attack_adds_and_guards_names():
    @register_attack("test-constant")
    def constant(oracle, x, y, *, value=1.0):
        oracle.predict_proba(x)
        return np.full(len(x), value)

    try:
        assert get_attack("test-constant") is constant
        with pytest.raises(ValueError, match="already registered"):
            register_attack("loss")(constant)
        with pytest.raises(ValueError, match="attack name must match"):
            register_attack("Bad Name")
        oracle = Oracle(LookupModel(P))
        out = evaluate_attacks(
            oracle, index_inputs(4), Y, [1, 0, 1, 0], ["test-constant"],
            {"test-constant": {"value": 2.0}},
        )
        np.testing.assert_array_equal(out["test-constant"].scores, 2.0)
    finally:
        ATTACKS.unregister("test-constant")


# --------------------------------------------------------------------------- membership sampling


def test_sample_nonmembers_matches_histogram_exactly():
    rng = np.random.default_rng(0)
    members = np.r_[np.full(30, 3), np.full(5, 0), np.full(12, 7)]
    holdout = rng.integers(0, 10, size=500)
    draw = sample_nonmembers(members, holdout, np.random.default_rng(1))
    assert isinstance(draw, NonmemberSample)
    assert draw.matched and draw.mismatched == 0 and draw.shortfall == {}
    assert draw.indices.size == members.size
    assert np.unique(draw.indices).size == draw.indices.size  # without replacement
    assert draw.indices.min() >= 0 and draw.indices.max() < holdout.size
    np.testing.assert_array_equal(
        np.bincount(holdout[draw.indices], minlength=10), np.bincount(members, minlength=10)
    )


def test_sample_nonmembers_disjoint_from_members_and_deterministic():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, size=300)
    member_ids = rng.choice(300, size=40, replace=False)
    holdout_ids = np.setdiff1d(np.arange(300), member_ids)
    a = sample_nonmembers(labels[member_ids], labels[holdout_ids], np.random.default_rng(5))
    b = sample_nonmembers(labels[member_ids], labels[holdout_ids], np.random.default_rng(5))
    c = sample_nonmembers(labels[member_ids], labels[holdout_ids], np.random.default_rng(6))
    np.testing.assert_array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)
    assert np.intersect1d(holdout_ids[a.indices], member_ids).size == 0
    seeded = sample_nonmembers(labels[member_ids], labels[holdout_ids], 5)  # an int seed
    np.testing.assert_array_equal(seeded.indices, a.indices)


def test_sample_nonmembers_tops_up_missing_classes():
    members = np.r_[np.full(30, 3), np.full(10, 1)]
    holdout = np.r_[np.full(10, 3), np.full(50, 1), np.full(50, 2)]
    draw = sample_nonmembers(members, holdout, np.random.default_rng(0))
    assert draw.indices.size == 40
    assert np.unique(draw.indices).size == 40
    assert draw.mismatched == 20 and draw.shortfall == {3: 20}
    assert not draw.matched
    drawn = holdout[draw.indices]
    assert (drawn == 3).sum() == 10  # every class-3 holdout sample is used first
    assert (drawn == 1).sum() >= 10  # class 1 fully matched, maybe topped up further
    again = sample_nonmembers(members, holdout, np.random.default_rng(0))
    np.testing.assert_array_equal(again.indices, draw.indices)
    with pytest.raises(ValueError, match="class 3: 20 missing of 30"):
        sample_nonmembers(members, holdout, np.random.default_rng(0), strict=True)


def test_sample_nonmembers_errors():
    with pytest.raises(ValueError, match="fewer than the 5 members"):
        sample_nonmembers(np.zeros(5, int), np.zeros(4, int), 0)
    with pytest.raises(ValueError, match="member_labels must be 1-D"):
        sample_nonmembers(np.zeros((2, 2), int), np.zeros(4, int), 0)
    with pytest.raises(ValueError, match="holdout_labels must hold integer"):
        sample_nonmembers(np.zeros(2, int), np.zeros(4), 0)


def test_sample_members():
    ids = np.arange(100, 200)
    sub = sample_members(ids, 10, np.random.default_rng(0))
    assert sub.size == 10 and np.unique(sub).size == 10
    assert np.isin(sub, ids).all() and np.all(np.diff(sub) > 0)  # original order kept
    np.testing.assert_array_equal(sub, sample_members(ids, 10, np.random.default_rng(0)))
    np.testing.assert_array_equal(sample_members(ids, None, 0), ids)
    np.testing.assert_array_equal(sample_members(ids, 500, 0), ids)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_members"):
            sample_members(ids, bad, 0)


def test_evaluate_attacks_reports_queries_time_and_metrics():
    torch.manual_seed(4)
    model = small_cnn()
    x = torch.rand(20, 1, 8, 8)
    y = np.arange(20) % 3
    mask = np.r_[np.ones(10), np.zeros(10)]
    oracle = Oracle(model, batch_size=7)
    out = evaluate_attacks(oracle, x, y, mask, list(BUILTIN), {"resmia": {"steps": 2}})
    assert list(out) == list(BUILTIN)  # in the order asked for
    for name, res in out.items():
        assert isinstance(res, AttackOutcome) and isinstance(res.metrics, MembershipMetrics)
        assert res.scores.shape == (20,) and res.scores.dtype == np.float64
        assert res.seconds_per_sample > 0
        assert res.metrics.min_fpr_resolution == 1 / 10  # 10 non-members
        assert res.metrics == MembershipMetrics.of(res.scores, mask)
        entry, plain = res.metrics.as_dict(), membership_metrics(res.scores, mask)
        assert {k: entry[k] for k in list(entry)[:5]} == {
            k: v for k, v in plain.items() if k not in ("n_members", "n_nonmembers")}
        assert entry["n_members"] == plain["n_members"]  # then the intervals (test_intervals)
        assert dict(res.info) == {}  # bare scores: nothing reported
        opts = {"steps": 2} if name == "resmia" else {}
        # the same batches as the oracle above: another batch size may take another float32
        # matmul kernel (rounding differs by CPU), so compare like with like ...
        expected = get_attack(name)(Oracle(model, batch_size=7), x, y, **opts)
        # ... and allow for float32 logits anyway: scores are float64 functions of softmax
        # outputs (<= 1) and log-probabilities of a 3-class net, so a few float32 ulps of
        # the logits (eps32 ~ 1.2e-7) bound any difference; 1e-5 absolute is ~100 ulps.
        np.testing.assert_allclose(res.scores, expected, rtol=0, atol=1e-5)
    assert out["resmia"].queries_per_sample == 3  # K = 2 -> 3 queries
    assert all(out[m].queries_per_sample == 1 for m in BUILTIN if m != "resmia")
    assert oracle.queries == 20 * (3 + 4)
    single = evaluate_attacks(Oracle(model), x, y, np.ones(20), ["loss"])
    assert single["loss"].metrics is None  # one class only: no metrics, scores still there
    assert single["loss"].scores.shape == (20,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        single["loss"].metrics = None  # type: ignore[misc]


def test_evaluate_attacks_returns_what_the_attack_reported():
    @register_attack("test-informative")
    def informative(oracle, x, y):
        oracle.predict_proba(x)
        oracle.predict_proba(x)
        return AttackScores(np.arange(len(x), dtype=np.float32), {"chosen": 3})

    try:
        out = evaluate_attacks(Oracle(LookupModel(P)), index_inputs(4), Y, [1, 0, 1, 0],
                               ["test-informative"])["test-informative"]
        assert out.queries_per_sample == 2.0
        np.testing.assert_array_equal(out.scores, [0, 1, 2, 3])
        assert out.scores.dtype == np.float64
        assert dict(out.info) == {"chosen": 3}
        with pytest.raises(TypeError):
            out.info["chosen"] = 4  # read-only
        # members score 0 and 2, non-members 1 and 3: 1 of the 4 pairs ranked right
        assert out.metrics.auc == 0.25
    finally:
        ATTACKS.unregister("test-informative")


def test_evaluate_attacks_validation():
    oracle = Oracle(small_cnn())
    x, y, mask = torch.rand(4, 1, 8, 8), np.arange(4) % 3, [1, 0, 1, 0]
    with pytest.raises(ValueError, match="unknown attack 'nope'"):
        evaluate_attacks(oracle, x, y, mask, ["nope"])
    with pytest.raises(ValueError, match="more than once"):
        evaluate_attacks(oracle, x, y, mask, ["loss", "loss"])
    with pytest.raises(ValueError, match="options given for unknown attack"):
        evaluate_attacks(oracle, x, y, mask, ["loss"], {"los": {}})
    with pytest.raises(ValueError, match="y must have shape"):
        evaluate_attacks(oracle, x, y[:3], mask, ["loss"])
    with pytest.raises(ValueError, match="member_mask must have shape"):
        evaluate_attacks(oracle, x, y, mask[:3], ["loss"])
    with pytest.raises(ValueError, match="methods is empty"):
        evaluate_attacks(oracle, x, y, mask, [])
    assert oracle.queries == 0
