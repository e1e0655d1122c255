"""The attacks on a round's aggregate (``<family>.on = ['aggregate']``): the aggregate of
one-step FedAvg is one step on the union of the clients' batches (checked in float64
against the clients' own steps), the jobs built from an explicit trajectory (start, end,
samples, ground truth), the one-line checks, and the threat matrix's aggregate-only and
insider cells."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedaudit.audit.context import Trajectory
from fedaudit.audit.stages.update_attacks import (AggregateRound, _initial_state,
                                                  aggregate_jobs, aggregate_rounds, UpdateAttacks)
from fedaudit.audit.update_attacks import local_training, run_update_job
from fedaudit.config import ScenarioError, load_scenario
from fedaudit.data import build_federated_data
from fedaudit.models.registry import image_model
from fedaudit.rundir.threat_matrix import MEASURED, NOT_MEASURED, threat_matrix

AGG = ["label_leakage.on=['aggregate']", "label_leakage.rounds='all'",
       "reconstruction.enabled=false", "federation.rounds=2"]


def _step(model, state, x, y, lr):
    """One SGD step of ``lr`` on the mean cross-entropy of (x, y), in float64."""
    model.load_state_dict(state)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    names = [n for n, _ in model.named_parameters()]
    return {n: state[n] - lr * g for n, g in zip(names, grads)}


def test_one_step_fedavg_s_aggregate_is_one_step_on_the_union_of_the_batches():
    s = load_scenario("reconstruction-digits")
    model = image_model(s.model, (1, 8, 8), 10, seed=0).double()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(0)
    sizes = [4, 4, 6]  # FedAvg weighs each client's step by its samples
    xs = [torch.rand((n, 1, 8, 8), generator=g, dtype=torch.float64) for n in sizes]
    ys = [torch.randint(0, 10, (n,), generator=g) for n in sizes]
    steps = [_step(model, state, x, y, 0.05) for x, y in zip(xs, ys)]
    n = sum(sizes)
    fedavg = {k: sum(w * st[k] for w, st in zip(sizes, steps)) / n for k in steps[0]}
    union = _step(model, state, torch.cat(xs), torch.cat(ys), 0.05)
    for k in union:  # float64 sums of ~10 terms: agreement to a few ulps of the weights
        torch.testing.assert_close(fedavg[k], union[k], rtol=1e-12, atol=1e-14)
    # the attack's recipe for it: the union as one client whose batch holds the K batches
    t = local_training(s, num_examples=8, merged=2)
    assert (t.batch_size, t.steps, t.num_examples) == (8, 1, 8)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    scenario = load_scenario("reconstruction-digits", AGG)
    data = build_federated_data(scenario)
    tmp = tmp_path_factory.mktemp("traj")
    g = torch.Generator().manual_seed(1)
    start = _initial_state(scenario, data)
    states = [{k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in start.items()}
              for _ in range(2)]
    paths = []
    for i, st in enumerate(states, 1):
        paths.append(tmp / f"round-{i:04d}.pt")
        torch.save(st, paths[-1])
    return scenario, data, start, states, Trajectory(tuple(paths), states[-1])


def test_the_rounds_aggregates_become_jobs_with_their_start_end_and_samples(setup):
    scenario, data, start, states, traj = setup
    rounds = aggregate_rounds([{"round": 1, "clients": [0, 2], "aggregated": True},
                               {"round": 2, "clients": [1], "aggregated": True},
                               {"round": 3, "clients": [0], "aggregated": False}], data)
    assert rounds == [AggregateRound(1, (0, 2), 8), AggregateRound(2, (1,), 4)]
    jobs, notes = aggregate_jobs(scenario, data, traj, rounds)
    assert notes == {} and [(j.family, j.client, j.round) for j in jobs] == [
        ("label_leakage", -1, 1), ("label_leakage", -1, 2)]
    first, second = jobs
    assert (first.num_examples, first.merged, second.num_examples, second.merged) == (8, 2, 4, 1)
    # round 1 starts from the model the server built; round r from the model after r - 1
    for k in start:
        assert torch.equal(first.start[k], start[k])
        assert torch.equal(first.received[k], states[0][k])
        assert torch.equal(second.start[k], states[0][k])
        assert torch.equal(second.received[k], states[1][k])
    union = np.concatenate([data.clients[0], data.clients[2]])
    assert np.array_equal(first.spec.true_labels, data.y[union])


def test_an_aggregate_job_is_the_union_as_one_client(setup):
    """Label leakage on the aggregate of clients 0 and 2 gives what it gives one client
    that holds their 8 samples and trains with batches of 8."""
    from dataclasses import replace

    scenario, data, start, states, traj = setup
    (job,) = aggregate_jobs(scenario, data, traj, [AggregateRound(1, (0, 2), 8)])[0]
    single = load_scenario("reconstruction-digits", [*AGG, "train.batch_size=8"])
    alone = replace(job, scenario=single, client=0, merged=1)
    a, b = run_update_job(job), run_update_job(alone)
    assert a.client == -1 and np.array_equal(a.outputs["bias-count"].counts,
                                             b.outputs["bias-count"].counts)


@pytest.mark.parametrize("sets, message", [
    (["label_leakage.on=['aggregate','aggregate']"], "label_leakage.on = ['aggregate', "
                                                     "'aggregate']: lists an entry twice"),
    (["label_leakage.on=[]"], "label_leakage.on = []: list each of updates, aggregate at "
                              "most once, at least one"),
    (["property_inference.enabled=true", "property_inference.on=['aggregate']"],
     "property_inference.on = ['aggregate']: the property inference attacks do not read "
     "the round's aggregate; allowed: updates"),
])
def test_what_a_family_cannot_read_is_refused_in_one_line(sets, message):
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_scenario("reconstruction-digits", sets)


def test_under_secure_aggregation_the_aggregate_needs_no_probe():
    s = load_scenario("reconstruction-digits", [
        "federation.aggregation=secagg+", "label_leakage.on=['aggregate']",
        "reconstruction.on=['aggregate']"])
    assert UpdateAttacks().probes(s) == ()
    with pytest.raises(ScenarioError, match="needs each client's update"):
        load_scenario("reconstruction-digits", ["federation.aggregation=secagg+"])


def test_the_aggregate_fills_the_aggregate_only_and_insider_rows():
    label = {"methods": ["bias-count"], "aggregate": {
        "methods": ["bias-count"], "pooled": {"bias-count": {
            "label_accuracy": 0.75, "label_accuracy_ci": [0.5, 0.9], "labels": 20,
            "labels_recovered": 15}}}}
    m = threat_matrix({"scenario": {"federation": {"aggregation": "secagg+"}},
                       "label_leakage": label})
    agg = m["curious server (aggregate only)"]["label leakage"]
    assert (agg.status, agg.figure, agg.interval) == (MEASURED, 0.75, [0.5, 0.9])
    assert agg.text.endswith("on the round's aggregate")
    ins = m["insider"]["label leakage"]
    assert ins.figure == 0.75 and ins.text.endswith("(its own update not subtracted)")
    assert m["curious server (each update)"]["label leakage"].status == "not possible"
    rec = m["curious server (aggregate only)"]["reconstruction"]
    assert rec.status == NOT_MEASURED and "reconstruction.on does not list" in rec.why
    prop = m["insider"]["property inference"]
    assert prop.status == NOT_MEASURED and "do not read a round's aggregate" in prop.why


def test_a_family_that_attacked_nothing_says_why():
    notes = ["client 0 round 1: 32 samples > reconstruction.max_samples = 16: not "
             "reconstructed", "aggregate of round 1: 256 samples > reconstruction.max_samples "
             "= 16: not reconstructed"]
    rec = {"methods": ["inverting-gradients"], "pooled": {"inverting-gradients": {"samples": 0}},
           "aggregate": {"methods": ["inverting-gradients"],
                         "pooled": {"inverting-gradients": {"samples": 0}}}, "notes": notes}
    m = threat_matrix({"scenario": {"federation": {"aggregation": "plain"}},
                       "reconstruction": rec})
    each = m["curious server (each update)"]["reconstruction"]
    assert each.status == NOT_MEASURED and each.why == f"no update was attacked ({notes[0]})"
    agg = m["curious server (aggregate only)"]["reconstruction"]
    assert agg.why == f"no aggregate was attacked ({notes[1]})"
