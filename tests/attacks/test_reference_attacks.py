"""LiRA and RMIA (attacks/membership/lira.py, rmia.py, rmia_tuning.py) against hand-computed cases, and the auditor's
reference models (fedaudit/audit/reference_models.py): split, plan, cache."""

import math
import os

import numpy as np
import pytest
import torch

from attacks.membership.reference_signals import MIN_STD, ReferenceSignals, logit_confidence
from attacks.membership.lira import lira_scores
from attacks.membership.rmia import rmia_scores
from fedaudit.config import load_scenario

from tests.helpers.oracles import FixedOracle


def _log_phi(z: float) -> float:
    """log of the standard normal CDF, from math.erf (independent of scipy)."""
    return math.log(0.5 * (1.0 + math.erf(z / math.sqrt(2.0))))


# float64 arithmetic on O(1) values: agreement to 1e-12 relative is far above rounding
TOL = dict(rtol=1e-12, atol=1e-12)


def test_logit_confidence_hand_values_and_confident_members_stay_finite():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    phi = logit_confidence(p, np.array([0, 2]))
    np.testing.assert_allclose(phi, [math.log(0.7 / 0.3), math.log(0.6 / 0.4)], **TOL)
    # p_y rounds to 1 in float64: the other classes' own probabilities still count
    sure = np.array([[1.0, 1e-9, 2e-9]])
    np.testing.assert_allclose(logit_confidence(sure, np.array([0])), [-math.log(3e-9)],
                               **TOL)
    # (R, N, C) stacks of reference outputs
    assert logit_confidence(np.stack([p, p]), np.array([0, 2])).shape == (2, 2)
    with pytest.raises(ValueError, match="integer labels"):
        logit_confidence(p, np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match=r"0\.\.2"):
        logit_confidence(p, np.array([0, 3]))


def test_lira_offline_per_sample_and_fixed_variance():
    refs = np.array([[0.0, 1.0, 2.0],
                     [2.0, 3.0, 2.0]])  # mean_out = [1, 2, 2]; per-sample std [1, 1, 0]
    target = np.array([2.0, 3.0, 1.0])
    got = lira_scores(target, refs, fixed_variance=False)
    # sample 2: both references agree, std floored at MIN_STD
    np.testing.assert_allclose(got[:2], [_log_phi(1.0), _log_phi(1.0)], **TOL)
    assert -np.inf < got[2] < -1e20  # log Phi(-1 / MIN_STD): finite, below everything
    # fixed variance: residuals (-1, 1), (-1, 1), (0, 0) -> sqrt(4 / 6)
    s = math.sqrt(4 / 6)
    got = lira_scores(target, refs, fixed_variance=True)
    np.testing.assert_allclose(got, [_log_phi(1 / s), _log_phi(1 / s), _log_phi(-1 / s)],
                               **TOL)
    # higher = more likely member: above the OUT models beats below them
    assert got[0] > got[2]


def test_lira_online_hand_computed():
    # 4 references x 3 samples; each sample IN for 2, OUT for 2
    in_mask = np.array([[1, 1, 0],
                        [1, 0, 1],
                        [0, 1, 1],
                        [0, 0, 0]], dtype=bool)
    refs = np.array([[3.0, 5.0, 0.0],
                     [5.0, 1.0, 1.0],
                     [0.0, 7.0, 5.0],
                     [2.0, 3.0, -2.0]])
    # IN: {3,5} {5,7} {1,5} -> mu 4, 6, 3; std 1, 1, 2
    # OUT: {0,2} {1,3} {0,-2} -> mu 1, 2, -1; std 1, 1, 1
    target = np.array([4.0, 2.0, 3.0])

    def llr(t, mi, si, mo, so):
        return (-(t - mi) ** 2 / (2 * si ** 2) - math.log(si)
                + (t - mo) ** 2 / (2 * so ** 2) + math.log(so))

    got = lira_scores(target, refs, in_mask, fixed_variance=False)
    np.testing.assert_allclose(got, [4.5, -8.0, 8.0 - math.log(2.0)], **TOL)
    np.testing.assert_allclose(got, [llr(4, 4, 1, 1, 1), llr(2, 6, 1, 2, 1),
                                     llr(3, 3, 2, -1, 1)], **TOL)
    # fixed variance: IN residuals +-1, +-1, +-2 -> sqrt(12 / 6); OUT all +-1 -> 1
    s_in = math.sqrt(2.0)
    got = lira_scores(target, refs, in_mask, fixed_variance=True)
    np.testing.assert_allclose(got, [llr(4, 4, s_in, 1, 1), llr(2, 6, s_in, 2, 1),
                                     llr(3, 3, s_in, -1, 1)], **TOL)
    assert got[2] > got[0] > got[1]


def test_lira_input_errors():
    with pytest.raises(ValueError, match="no IN reference"):
        lira_scores([1.0], [[0.0], [1.0]], np.array([[False], [False]]))
    with pytest.raises(ValueError, match="bool array"):
        lira_scores([1.0], [[0.0], [1.0]], np.array([[1], [0]]))
    with pytest.raises(ValueError, match=r"\(R, N\)"):
        lira_scores([1.0, 2.0], [[0.0], [1.0]])


def test_rmia_offline_hand_computed():
    # a = 0.5: p(.) = 0.75 * mean_OUT + 0.25
    rx = np.array([[0.2, 0.6, 1.0], [0.6, 0.2, 0.6]])  # mean 0.4 0.4 0.8 -> p(x) .55 .55 .85
    tx = np.array([0.55, 0.99, 0.17])  # ratio_x = 1, 1.8, 0.2
    rz = np.array([[0.2, 1.0, 0.6], [0.6, 0.6, 0.2]])  # mean .4 .8 .4 -> p(z) .55 .85 .55
    tz = np.array([0.55, 0.425, 1.0])  # ratio_z = 1, 0.5, 1.818...
    got = rmia_scores(tx, rx, tz, rz, gamma=1.0, offline_a=0.5)
    np.testing.assert_allclose(got, [2 / 3, 2 / 3, 0.0], **TOL)
    # gamma = 2: LR >= 2 <=> ratio_z <= ratio_x / 2 = 0.5, 0.9, 0.1
    got = rmia_scores(tx, rx, tz, rz, gamma=2.0, offline_a=0.5)
    np.testing.assert_allclose(got, [1 / 3, 1 / 3, 0.0], **TOL)


def test_rmia_online_hand_computed():
    rx = np.array([[0.2, 0.6, 1.0], [0.6, 0.2, 0.6]])  # p(x) = mean = 0.4 0.4 0.8
    tx = np.array([0.4, 0.8, 0.2])  # ratio_x = 1, 2, 0.25
    rz = np.array([[0.2, 1.0, 0.6], [0.6, 0.6, 0.2]])  # p(z) = 0.4 0.8 0.4
    tz = np.array([0.2, 0.8, 0.6])  # ratio_z = 0.5, 1, 1.5
    got = rmia_scores(tx, rx, tz, rz, gamma=1.0)
    np.testing.assert_allclose(got, [2 / 3, 1.0, 0.0], **TOL)
    assert got[1] > got[0] > got[2]  # the sample the target likes most, relative to p(x)


def test_rmia_input_errors():
    ok = dict(target_px=[0.5], reference_px=[[0.5]], target_pz=[0.5], reference_pz=[[0.5]])
    with pytest.raises(ValueError, match="gamma"):
        rmia_scores(**ok, gamma=0.0)
    with pytest.raises(ValueError, match="offline_a"):
        rmia_scores(**ok, offline_a=1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        rmia_scores(**{**ok, "target_px": [1.5]})
    with pytest.raises(ValueError, match="same R"):
        rmia_scores(**{**ok, "reference_pz": [[0.5], [0.5]]})
    with pytest.raises(ValueError, match="no population"):
        rmia_scores(**{**ok, "target_pz": [], "reference_pz": [[]]})


def test_registered_attacks_wire_the_signals_and_count_population_queries():
    from attacks.membership import evaluate_attacks

    # 3 audit samples (rows 0-2) and 3 population samples (rows 3-5), 2 classes
    p_target = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8], [0.6, 0.4], [0.5, 0.5],
                         [0.7, 0.3]])
    refs = np.array([[[0.6, 0.4], [0.5, 0.5], [0.4, 0.6]],
                     [[0.4, 0.6], [0.3, 0.7], [0.6, 0.4]]])
    pop_refs = np.array([[[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
                         [[0.7, 0.3], [0.3, 0.7], [0.5, 0.5]]])
    signals = ReferenceSignals(refs, None, np.array([3, 4, 5]), np.zeros(3, dtype=int),
                               pop_refs)
    y = np.array([0, 0, 0])
    out = evaluate_attacks(FixedOracle(p_target), np.array([0, 1, 2]), y,
                           np.array([1, 0, 0]), ["lira", "rmia"],
                           {"rmia": {"a": 0.3, "gamma": 1.0}}, references=signals)
    expect_lira = lira_scores(logit_confidence(p_target[:3], y), logit_confidence(refs, y),
                              fixed_variance=True)
    np.testing.assert_allclose(out["lira"].scores, expect_lira, **TOL)
    expect_rmia = rmia_scores(p_target[:3, 0], refs[:, :, 0], p_target[3:, 0],
                              pop_refs[:, :, 0], gamma=1.0, offline_a=0.3)
    np.testing.assert_allclose(out["rmia"].scores, expect_rmia, **TOL)
    assert out["lira"].queries_per_sample == 1.0
    assert out["rmia"].queries_per_sample == 2.0  # 3 audit + 3 population queries
    with pytest.raises(ValueError, match="need reference models"):
        evaluate_attacks(FixedOracle(p_target), np.array([0, 1, 2]), y, np.array([1, 0, 0]),
                         ["rmia"])


# ------------------------------------------------------------ the auditor's references

def _scenario(*sets):
    return load_scenario("quickstart", ["federation.rounds=2", "federation.num_clients=3",
                                        "data.max_samples=300", "train.local_epochs=1",
                                        "attack.methods=['loss','lira','rmia']",
                                        "attack.reference.models=2",
                                        "attack.reference.allow_smaller=true", *sets])


def test_cache_hit_trains_nothing_and_a_changed_recipe_retrains(tmp_path, monkeypatch):
    from fedaudit.data import build_federated_data
    from fedaudit.audit.reference_models import attack_split, load_or_train
    from fedaudit.simulation.reference_federations import reference_trainer

    monkeypatch.setenv("FEDAUDIT_CACHE", str(tmp_path / "cache"))

    def refs(*sets):
        s = _scenario(*sets)
        d = build_federated_data(s)
        split = attack_split(s, d)
        return load_or_train(s, d, split, np.sort(d.train[:30]), reference_trainer(s, d))

    first = refs()
    assert (first.trained, first.cached) == (2, 0)
    again = refs()
    assert (again.trained, again.cached) == (0, 2)
    for a, b in zip(first.states, again.states):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert first.summary()["cache_dir"] == str(tmp_path / "cache" / "references")
    changed = refs("train.lr=0.01")
    assert (changed.trained, changed.cached) == (2, 0)
    # the cache location is the user's: nothing was written elsewhere
    assert len(list((tmp_path / "cache" / "references").glob("*.pt"))) == 4


def _train(s, d, ids, seed):
    """One reference federation on ``ids`` through the Flower stack, in this process."""
    from fedaudit.audit.reference_models import reference_job
    from fedaudit.simulation.reference_federations import reference_trainer

    ((_, state),) = reference_trainer(s, d)([reference_job(s, d, 0, ids, seed)])
    return state


def test_reference_training_is_the_clients_code_and_deterministic():
    """A reference federation is the target's strategy stack over the ClientApp on the
    partitioned ids: same seed, same weights; two seeds differ."""
    from fedaudit.data import build_federated_data

    s = _scenario()
    d = build_federated_data(s)
    ids = np.sort(d.test[:60])
    a, b, c = _train(s, d, ids, 5), _train(s, d, ids, 5), _train(s, d, ids, 6)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


@pytest.mark.parametrize("sets, fragment", [
    (["attack.reference.mode=online", "attack.reference.models=3"], "even number"),
    (["attack.reference.models=1"], "out of range"),
])
def test_reference_attack_scenario_errors(sets, fragment):
    from fedaudit.errors import ScenarioError

    with pytest.raises(ScenarioError) as exc:
        _scenario(*sets)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_reference_training_under_central_dp_goes_through_flowers_wrapper():
    """dp-server references: Flower's server-side fixed-clipping wrapper clips each
    client's update to clip_norm before the uniform mean (noise 0: the model moves at most
    rounds x clip_norm); with noise the wrapper's seeded noise moves it."""
    from fedaudit.data import build_federated_data
    from fedaudit.models import model_for

    s0 = _scenario("defense.kind=dp-server", "defense.noise_multiplier=0", "defense.clip_norm=0.01")
    s1 = _scenario("defense.kind=dp-server", "defense.noise_multiplier=1", "defense.clip_norm=0.01")
    d = build_federated_data(s0)
    ids = np.sort(d.test[:60])
    init = model_for(s0.model, d, seed=5).state_dict()
    a, b = _train(s0, d, ids, 5), _train(s1, d, ids, 5)
    moved = math.sqrt(sum(float(((a[k].double() - init[k].double()) ** 2).sum()) for k in a))
    # 2 rounds, each mean of updates clipped to 0.01: the model moves at most 0.02, plus
    # the float32 rounding of the stored weights (each of the 2 rounds stores the clipped
    # states and their mean: <= 2 * 2 * eps/2 * ||w|| in all)
    norm = max(math.sqrt(sum(float((w[k].double() ** 2).sum()) for k in w)) for w in (init, a))
    assert 0.0 < moved <= 0.02 + 2 * float(np.finfo(np.float32).eps) * norm
    assert not all(torch.equal(a[k], b[k]) for k in a)  # the noise is there
    np.testing.assert_equal(a.keys(), b.keys())


def test_reference_signals_align_any_subset_of_the_planned_audit_ids():
    """Reference outputs and the online IN mask follow the ids asked for, in their order;
    ids the references were not planned for are refused."""
    from pathlib import Path
    from types import SimpleNamespace

    from fedaudit.audit.reference_models import (AttackSplit, ReferencePlan, References,
                                           ReferenceSizes, reference_signals)

    x = torch.arange(12, dtype=torch.float32).reshape(12, 1)
    data = SimpleNamespace(x=x.numpy(), y=np.zeros(12, dtype=np.int64), num_classes=2)
    model = torch.nn.Linear(1, 2)
    states = [{"weight": torch.tensor([[1.0], [0.0]]), "bias": torch.zeros(2)},
              {"weight": torch.tensor([[0.0], [1.0]]), "bias": torch.zeros(2)}]
    audit = np.array([2, 5, 7, 9, 11])
    in_mask = np.array([[1, 0, 1, 0, 1], [0, 1, 0, 1, 0]], dtype=bool)
    sizes = ReferenceSizes(5, 0, 5, (5, 5), True)
    plan = ReferencePlan((audit, audit), (0, 1), audit, in_mask, sizes)
    split = AttackSplit(audit, np.array([0, 1]), np.array([0, 1, 3, 4]))
    refs = References(states, plan, split, 0, 2, 0.0, Path("."))
    sig = reference_signals(refs, data, np.array([9, 11]), model, torch.device("cpu"), 8)
    assert sig.probs.shape == (2, 2, 2)
    np.testing.assert_array_equal(sig.in_mask, in_mask[:, [3, 4]])
    full = reference_signals(refs, data, audit, model, torch.device("cpu"), 8)
    np.testing.assert_allclose(sig.probs, full.probs[:, [3, 4]], rtol=0, atol=0)
    for bad in (np.array([9, 12]), np.array([4])):
        with pytest.raises(ValueError, match="audit ids differ"):
            reference_signals(refs, data, bad, model, torch.device("cpu"), 8)


def test_using_cache_points_the_cache_elsewhere_and_restores_it(tmp_path, monkeypatch):
    from fedaudit.rundir import cache_root, using_cache

    monkeypatch.setenv("FEDAUDIT_CACHE", str(tmp_path / "mine"))
    with using_cache(tmp_path / "other"):
        assert cache_root() == tmp_path / "other"
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("FEDAUDIT_CACHE")
    with using_cache(tmp_path / "other"):
        assert cache_root() == tmp_path / "other"
    assert "FEDAUDIT_CACHE" not in os.environ
    with using_cache(None):  # no --cache: the environment decides
        assert cache_root() != tmp_path / "other"
