"""The one-run DP audit's scenario: [audit.dp] defaults, guesses and errors, the canaries
planted in the data (not in the attack sets), the defenses that have an audit level, the
bundled audit scenarios' claims."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.data import build_federated_data


def test_audit_dp_defaults_and_guess_counts():
    s = load_scenario("defense-none")
    assert s.audit.dp.canaries == 0 and s.audit.dp.beta == 0.05
    assert build_federated_data(s).dp_canaries is None
    s = load_scenario("defense-none", ["audit.dp.canaries=201"])
    assert s.audit.dp.guess_counts() == (50, 50)
    s = load_scenario("defense-none", ["audit.dp.canaries=200", "audit.dp.k_plus=30",
                                       "audit.dp.k_minus=0"])
    assert s.audit.dp.guess_counts() == (30, 0)
    # level "auto" is resolved to the defense's, so the clients rebuild the same data
    assert s.sections()["audit.dp"] == {"canaries": 200, "level": "sample", "k_plus": 30,
                                        "k_minus": 0, "beta": 0.05}


@pytest.mark.parametrize("overrides, fragment", [
    (["audit.dp.canaries=10", "audit.dp.k_plus=8", "audit.dp.k_minus=3"],
     "more guesses than audit.dp.canaries"),
    (["audit.dp.canaries=10", "audit.dp.k_plus=0", "audit.dp.k_minus=0"], "at least one guess"),
    (["audit.dp.canaries=10", "audit.dp.level='client'"],
     "audited at the sample level; allowed: 'auto', 'sample'"),
    (["audit.dp.level='bogus'"], "unknown choice"),
    (["audit.dp.beta=0.0"], "audit.dp.beta"),
    (["audit.dp.canaries=-1"], "audit.dp.canaries"),
])
def test_audit_dp_errors(overrides, fragment):
    with pytest.raises(ScenarioError, match=fragment):
        load_scenario("defense-none", overrides)


def test_too_many_canaries_for_the_holdout():
    s = load_scenario("defense-none", ["audit.dp.canaries=251"])  # holdout: 500 samples
    with pytest.raises(ScenarioError, match=r"audit.dp.canaries = 251: .*allowed: 0..250"):
        build_federated_data(s)


def test_canaries_planted_in_clients_and_kept_out_of_attacks():
    from fedaudit.audit.sets import attack_sets

    plain = build_federated_data(load_scenario("defense-none"))
    s = load_scenario("defense-none", ["audit.dp.canaries=200"])
    d = build_federated_data(s)
    can = d.dp_canaries
    assert can.m == 200 and 70 < can.included.sum() < 130  # Binomial(200, 1/2): sd 7.1
    # from the holdout, removed from it; everything else unchanged
    assert np.isin(can.ids, plain.holdout).all() and not np.isin(can.ids, d.holdout).any()
    assert np.array_equal(np.sort(np.r_[d.holdout, can.ids]), plain.holdout)
    assert np.array_equal(d.test, plain.test)
    assert np.all(d.y[can.ids] != plain.y[can.ids]) and np.array_equal(d.y[can.ids], can.label)
    others = np.setdiff1d(np.arange(len(d.y)), can.ids)
    assert np.array_equal(d.y[others], plain.y[others])
    for c, ids in enumerate(d.clients):
        mine = can.ids[can.client == c]
        assert np.array_equal(np.sort(np.r_[plain.clients[c], mine]), ids)
    assert not np.isin(can.ids[~can.included], d.train).any()
    for st in attack_sets(s, d):
        assert not np.isin(can.ids, st.members).any()
        assert not np.isin(can.ids, st.nonmembers).any()
    # reproducible: the same draw from a fresh build
    from fedaudit.data.federated import _build_cached

    _build_cached.cache_clear()
    again = build_federated_data(s).dp_canaries
    assert np.array_equal(again.ids, can.ids) and np.array_equal(again.included, can.included)


def test_a_defense_without_an_audit_level_is_refused():
    from fedaudit.defenses import DEFENSES, Defense, register_defense

    @register_defense
    class Opaque(Defense):
        kind = "test-opaque"

        def summary(self, cfg, rounds, *, num_clients, num_sampled):
            return {"epsilon": None, "accounting": "", "notes": []}

    try:
        assert load_scenario("quickstart", ["defense.kind=test-opaque"]).audit.dp.level == "auto"
        with pytest.raises(ScenarioError, match="'test-opaque' has no DP audit; allowed: "):
            load_scenario("quickstart", ["defense.kind=test-opaque", "audit.dp.canaries=8"])
    finally:
        DEFENSES.unregister("test-opaque")


def test_audit_scenarios_claim_what_one_run_can_reach():
    """The bundled audit scenarios claim about 6.2-6.35 (issue 31 asks 2-8): with m
    canaries all guessed right Steinke's bound cannot exceed about log m (6.9 at 1,000)."""
    from fedaudit.defenses.accounting import gaussian_epsilon, rdp_epsilon

    s = load_scenario("dp-audit")
    assert (s.audit.dp.canaries, s.audit.dp.level) == (1000, "gradient")
    n = 4000 // 2 // s.federation.num_clients  # half the samples train: 200 per client
    q, steps = 1 / math.ceil(n / s.train.batch_size), s.federation.rounds * s.train.local_epochs \
        * math.ceil(n / s.train.batch_size)
    assert (q, steps) == (0.5, 100)
    claim = rdp_epsilon(s.defense.options["noise_multiplier"], q, steps, 1e-5)
    assert 6.3 < claim < 6.4  # the 6.35 of docs/validation.md section 10
    c = load_scenario("dp-audit-client")
    assert (c.defense.kind, c.audit.dp.canaries) == ("dp-server", 1000)
    claim = gaussian_epsilon(c.defense.options["noise_multiplier"], c.federation.rounds, 1e-5)
    assert 6.1 < claim < 6.3  # 6.21: comparable with dp-audit's
    assert c.data == s.data and c.model == s.model
