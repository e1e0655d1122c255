"""data.client_samples: each client keeps at most that many of its partition, a seeded
random subset; 0 changes nothing."""

import numpy as np
import pytest

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.data import build_federated_data
from fedaudit.data.federated import cap_clients


def test_cap_keeps_a_seeded_subset_of_each_partition():
    parts = [np.arange(0, 10), np.arange(10, 13), np.arange(13, 30)]
    capped = cap_clients(parts, 4, seed=7)
    assert [len(c) for c in capped] == [4, 3, 4]
    for before, after in zip(parts, capped):
        assert np.all(np.isin(after, before)) and np.all(np.diff(after) > 0)
    np.testing.assert_array_equal(capped[1], parts[1])  # fewer than the cap: all kept
    again = cap_clients(parts, 4, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(capped, again))
    other = cap_clients(parts, 4, seed=8)
    assert any(not np.array_equal(a, b) for a, b in zip(capped, other))
    assert cap_clients(parts, 0, seed=7) is parts


def test_a_scenario_whose_clients_hold_one_batch():
    full = build_federated_data(load_scenario("quickstart", ["federation.num_clients=4"]))
    s = load_scenario("quickstart", ["federation.num_clients=4", "data.client_samples=8"])
    d = build_federated_data(s)
    assert [len(c) for c in d.clients] == [8, 8, 8, 8]
    for c, ids in enumerate(d.clients):
        assert np.all(np.isin(ids, full.clients[c]))  # the same partition, cut
    np.testing.assert_array_equal(d.train, np.sort(np.concatenate(d.clients)))
    # the splits the audit uses are those of the uncut run
    np.testing.assert_array_equal(d.holdout, full.holdout)
    np.testing.assert_array_equal(d.test, full.test)


def test_one_cap_per_client_cuts_only_the_capped_clients():
    parts = [np.arange(0, 10), np.arange(10, 20), np.arange(20, 30)]
    capped = cap_clients(parts, [4, 0, 2], seed=7)
    assert [len(c) for c in capped] == [4, 10, 2]
    np.testing.assert_array_equal(capped[1], parts[1])  # 0: every sample kept
    # a client's subset is the one the same cap for every client gives it
    np.testing.assert_array_equal(capped[0], cap_clients(parts, 4, seed=7)[0])
    np.testing.assert_array_equal(capped[2], cap_clients(parts, 2, seed=7)[2])
    assert cap_clients(parts, [0, 0, 0], seed=7) is parts
    with pytest.raises(ValueError, match="2 caps for 3 clients"):
        cap_clients(parts, [4, 4], seed=7)


def test_a_federation_of_large_clients_beside_two_of_one_batch():
    full = build_federated_data(load_scenario("quickstart", ["federation.num_clients=4"]))
    s = load_scenario("quickstart", ["federation.num_clients=4",
                                     "data.client_samples=[8, 8, 0, 0]"])
    d = build_federated_data(s)
    assert [len(c) for c in d.clients][:2] == [8, 8]
    for c in (2, 3):
        np.testing.assert_array_equal(d.clients[c], full.clients[c])


@pytest.mark.parametrize("value, says", [
    ("[8, 8]", "lists 2 caps for federation.num_clients = 4"),
    ("[8, -1, 0, 0]", "or a list of them"),
    ("[]", "or a list of them"),
    ("-3", "or a list of them"),
    ("true", "wrong type, expected integer or array"),
    ("[4, true, 0, 0]", "or a list of them"),
])
def test_bad_caps_are_refused_naming_the_key(value, says):
    with pytest.raises(ScenarioError, match="data.client_samples") as err:
        load_scenario("quickstart", ["federation.num_clients=4", f"data.client_samples={value}"])
    assert says in str(err.value)
