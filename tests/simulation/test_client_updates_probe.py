"""The client-updates probe keeps the (client, round) updates the enabled families' tables
select (the union of [label_leakage]'s and [reconstruction]'s ``clients`` x ``rounds``) -- the start model, each client's model as received, its num_examples -- and
kept_cases / load_case read them back bit for bit."""

import numpy as np
import pytest
import torch

from fedaudit.config import load_scenario
from fedaudit.probes import ProbeRun, Reply, RoundRecord, RoundView
from fedaudit.probes.client_updates import ClientUpdates, UpdateSelection, kept_cases, load_case


def _view(round_, clients):
    start = {"w": np.zeros((2, 3), np.float32), "b": np.zeros(2, np.float32)}
    replies = tuple(Reply(round_, c, 10 + c, 0.5,
                          {"w": np.full((2, 3), c + round_ / 10, np.float32),
                           "b": np.full(2, -c, np.float32)}, start)
                    for c in clients)
    return RoundView(round_, replies, None)


@pytest.mark.parametrize("rounds, clients, kept", [
    ('"first"', "[]", {(1, 0), (1, 1), (1, 2)}),
    ('"last"', "[1]", {(3, 1)}),
    ('"all"', "[0, 2]", {(1, 0), (1, 2), (2, 0), (3, 0), (3, 2)}),
    ("[2, 3]", "[]", {(2, 0), (2, 1), (3, 1), (3, 0), (3, 2)}),
])
def test_the_selected_updates_are_kept(tmp_path, rounds, clients, kept):
    s = load_scenario("quickstart", ["federation.rounds=3", "federation.num_clients=3",
                                     "reconstruction.enabled=true",
                                     f"reconstruction.rounds={rounds}",
                                     f"reconstruction.clients={clients}"])
    _check_kept(s, tmp_path, kept)


def test_the_families_selections_are_joined(tmp_path):
    s = load_scenario("quickstart", ["federation.rounds=3", "federation.num_clients=3",
                                     "reconstruction.enabled=true", "reconstruction.rounds=[2]",
                                     "reconstruction.clients=[1]",
                                     "label_leakage.enabled=true", "label_leakage.rounds='last'",
                                     "label_leakage.clients=[0]"])
    _check_kept(s, tmp_path, {(2, 1), (3, 0)})


def test_no_enabled_family_keeps_nothing(tmp_path):
    s = load_scenario("quickstart", ["federation.rounds=3", "federation.num_clients=3",
                                     "reconstruction.rounds='all'"])
    _check_kept(s, tmp_path, set())


def _check_kept(s, tmp_path, kept):
    probe = ClientUpdates(ProbeRun(s, tmp_path))
    for r, cs in ((1, [0, 1, 2]), (2, [0, 1]), (3, [1, 0, 2])):
        probe.on_round(_view(r, sorted(cs)), RoundRecord(tmp_path, r))
    cases = kept_cases(tmp_path)
    assert {(k.round, k.client) for k in cases} == kept
    assert cases == sorted(cases, key=lambda k: (k.round, k.client))
    for k in cases:
        assert k.num_examples == 10 + k.client
        start, model = load_case(tmp_path, k)
        assert torch.equal(start["w"], torch.zeros(2, 3))
        assert torch.equal(model["w"], torch.full((2, 3), k.client + k.round / 10))
        assert torch.equal(model["b"], torch.full((2,), float(-k.client)))


def test_selection_reads_the_table():
    sel = UpdateSelection.of({"clients": [], "rounds": "last"}, total=5)
    assert sel.keeps_client(4) and sel.keeps_round(5) and not sel.keeps_round(4)
    sel = UpdateSelection.of({"clients": [1], "rounds": [2, 4]}, total=5)
    assert sel.keeps_client(1) and not sel.keeps_client(0)
    assert [r for r in range(1, 6) if sel.keeps_round(r)] == [2, 4]


@pytest.mark.parametrize("rounds, total, kept", [
    ("middle", 20, [10]), ("middle", 3, [2]), ("middle", 1, [1]),
    (["first", "middle", "last"], 20, [1, 10, 20]), (["first", 7, "last"], 9, [1, 7, 9]),
    ("every 5", 20, [5, 10, 15, 20]), ("every 1", 3, [1, 2, 3]),
])
def test_rounds_by_their_place_in_training(rounds, total, kept):
    sel = UpdateSelection.of({"clients": [], "rounds": rounds}, total=total)
    assert [r for r in range(1, total + 1) if sel.keeps_round(r)] == kept


@pytest.mark.parametrize("value, message", [
    ('"every 0"', "must be 'first', 'middle', 'last', 'all', 'every N' or a list of rounds"),
    ("sometimes", "must be 'first', 'middle', 'last', 'all', 'every N' or a list of rounds"),
    ("['first', 'later']", "round numbers >= 1 or the words 'first', 'middle', 'last'"),
    ('"every 4"', "no round is a multiple of 4 in 1..3"),
    ("['middle', 5]", "round 5 does not exist; allowed: 1..3"),
])
def test_bad_rounds_are_refused_in_one_line(value, message):
    from fedaudit.config import ScenarioError, load_scenario

    with pytest.raises(ScenarioError, match="reconstruction.rounds") as err:
        load_scenario("reconstruction-digits", ["federation.rounds=3",
                                                f"reconstruction.rounds={value}"])
    assert message in str(err.value)
