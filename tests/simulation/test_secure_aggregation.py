"""federation.aggregation = "secagg+": what validation refuses (one line each, before
training), the client mod's pass-through, and the server bridge's hand-over of the
aggregate to the auditing strategy (the protocol itself is Flower's; a whole run through
it: tests/e2e/test_secagg_run.py)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters
from flwr.serverapp.strategy import FedAvg

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.config.preflight import check_scenario
from fedaudit.probes import ProbeRun
from fedaudit.probes.update_norm import UpdateNorm
from strategies.auditing import AuditingStrategy
from strategies.secure_aggregation import KEYS, UNIT, _OneRound, secagg_when_asked_mod

SECAGG = "federation.aggregation=secagg+"


@pytest.mark.parametrize("overrides, message", [
    ([], None),
    (["federation.secagg.num_shares=4"],
     "federation.secagg.num_shares = 4: SecAgg.* needs an odd number of shares, at most the "
     "10 clients per round; allowed: 3, 5, 7, 9$"),
    (["federation.secagg.num_shares=11"], "num_shares = 11: .*allowed: 3, 5, 7, 9$"),
    (["federation.secagg.reconstruction_threshold=5"],
     "reconstruction_threshold = 5: must be below num_shares = 5; allowed: 2..4$"),
    (["federation.secagg.modulus_range=3000000"],
     "modulus_range = 3000000: must be a power of 2 above quantization_range"),
    (["federation.secagg.modulus_range=8589934592"], "at most 2\\^32"),
    (["federation.strategy=FedMedian"],
     "federation.strategy = 'FedMedian' needs each client's update, but "
     "federation.aggregation = 'secagg\\+' shows the server only the round's aggregate; "
     "aggregations that show it: plain$"),
    (["federation.num_clients=2"], "needs at least 3 clients per round"),
    (["defense.kind=dp-server"],
     "defense.kind = 'dp-server' clips each update on the server, .*allowed with secagg\\+: "
     "dp-client, dp-sgd, none, sparsify$"),
    (["defense.kind=clip"], "defense.kind = 'clip' clips each update on the server"),
    (["faults.nan_rate=0.1"], "faults.nan_rate = 0.1: under .* cannot reject"),
    (["attack.targets=['clients']"],
     "attack.targets listing 'clients' needs each client's update .* shows the server only "
     "the round's aggregate; aggregations that show it: plain$"),
    (["audit.gnq.server=true"], "audit.gnq.server = true needs each client's update"),
    (["audit.gnq.client=true"], "audit.gnq.client = true needs each client's audit records"),
])
def test_what_secagg_cannot_run_with_is_refused_in_one_line(overrides, message):
    if message is None:
        assert load_scenario("secagg", overrides).federation.aggregation == "secagg+"
        return
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenario("secagg", overrides)
    assert "\n" not in str(err.value)


def test_a_client_larger_than_max_weight_is_refused_before_training():
    with pytest.raises(ScenarioError, match="federation.secagg.max_weight = 50: a client "
                                            "holds 108 training samples"):
        check_scenario(load_scenario("secagg", ["federation.secagg.max_weight=50"]))
    check_scenario(load_scenario("secagg", ["federation.secagg.max_weight=108"]))


def test_plain_scenarios_ignore_the_secagg_table():
    s = load_scenario("quickstart", ["federation.secagg.num_shares=4"])
    assert s.federation.aggregation == "plain"


def test_the_mod_passes_every_other_message_through(identity):
    called = []

    def nxt(msg, ctxt):
        called.append(msg)
        return msg

    train = Message(RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=1,
                    message_type=MessageType.TRAIN)
    query = Message(RecordDict(), dst_node_id=1, message_type="query.update_attack")
    assert secagg_when_asked_mod(train, None, nxt) is train
    assert secagg_when_asked_mod(query, None, nxt) is query
    assert called == [train, query]


def test_the_bridge_hands_the_aggregate_to_the_auditing_strategy_as_stand_ins(identity):
    """Flower gives every client's FitRes the (float64) unmasked aggregate and the
    client's metrics; the auditing strategy gets them in the model's dtypes, aggregates
    them (identical arrays: the aggregate itself) and shows no probe a client's update."""
    start = {"w": torch.zeros(3, 2), "b": torch.zeros(2)}
    rounds, seen = [], []

    class Spy(UpdateNorm):
        def on_reply(self, reply, record):
            seen.append(reply)

    run = ProbeRun(load_scenario("quickstart"), Path("."))
    auditing = AuditingStrategy(FedAvg(fraction_evaluate=0.0), probes=[Spy(run)],
                                on_round=lambda r, a, audit: rounds.append((r, a, audit)))
    auditing._global = ArrayRecord(start)
    sent = [Message(RecordDict({"arrays": ArrayRecord(start),
                                "config": ConfigRecord({"server-round": 1})}),
                    dst_node_id=n, message_type=MessageType.TRAIN) for n in (11, 12, 13)]
    one = _OneRound(None, sent, ["w", "b"], 1000, auditing, 1)
    fit = one.configure_fit(1, ndarrays_to_parameters([v.numpy() for v in start.values()]),
                            None)
    assert [p.node_id for p, _ in fit] == [11, 12, 13]
    assert fit[0][1].config[KEYS] == "w\nb" and fit[0][1].config[UNIT] == 1000
    agg = [np.arange(6, dtype=np.float64).reshape(3, 2) / 7, np.array([0.5, -0.25])]
    results = [(proxy, FitRes(Status(Code.OK, ""), ndarrays_to_parameters(agg), 10 + i,
                              {"num-examples": 10 + i, "train-loss": 0.1 * i,
                               "partition-id": i}))
               for i, (proxy, _) in enumerate(fit)]
    # the third client dropped out after sharing its keys: SecAgg+ recovered the others
    assert one.aggregate_fit(1, results[:2], [RuntimeError("boom\nTraceback")]) == (None, {})
    arrays, _ = one.result
    got = {k: arrays[k].numpy() for k in arrays.keys()}
    assert got["w"].dtype == np.float32
    # FedAvg's weighted mean of two float32 copies of the aggregate: the aggregate to
    # float32 rounding (a few ulps of values below 1)
    np.testing.assert_allclose(got["w"], agg[0].astype(np.float32), rtol=0, atol=1e-6)
    np.testing.assert_allclose(got["b"], agg[1].astype(np.float32), rtol=0, atol=1e-6)
    (r, _, audit), = rounds
    assert r == 1 and audit.aggregated and [c.partition_id for c in audit.clients] == [0, 1]
    assert [(f["node_id"], f["reason"]) for f in audit.failures] == [
        (13, "client error: dropped out of SecAgg+ (boom)")]
    assert seen == []  # no probe saw a stand-in as a client's update


def test_each_client_trains_from_the_model_its_message_carries(identity):
    """A malicious server's model goes out through SecAgg+ as through a plain round: each
    client's FitIns holds the arrays of the message the auditing strategy built for it
    (here one modified model, another per client), not the workflow's global parameters
    (before issue 57's review every client got the global model: the gradient-ascent
    server's round under SecAgg+ was an honest one, its aggregate equal to the honest run's
    bit for bit)."""
    from flwr.common import parameters_to_ndarrays

    glob = {"w": torch.zeros(3, 2), "b": torch.zeros(2)}
    mine = {n: {"w": torch.full((3, 2), float(n)), "b": torch.full((2,), -float(n))}
            for n in (11, 12)}
    sent = [Message(RecordDict({"arrays": ArrayRecord(mine[n]),
                                "config": ConfigRecord({"server-round": 1})}),
                    dst_node_id=n, message_type=MessageType.TRAIN) for n in (11, 12)]
    one = _OneRound(None, sent, ["w", "b"], 1000, None, 1)
    fit = one.configure_fit(1, ndarrays_to_parameters([v.numpy() for v in glob.values()]),
                            None)
    for (proxy, ins) in fit:
        w, b = parameters_to_ndarrays(ins.parameters)
        n = int(proxy.node_id)
        assert np.array_equal(w, mine[n]["w"].numpy()) and np.array_equal(b, mine[n]["b"].numpy())


def test_flowers_quantisation_error_is_within_the_documented_bound():
    """The bound the e2e run and bench/secagg.py check (docs/algorithms.md section 16), on
    explicit arrays through Flower's own quantize / dequantize: each client's weighted model
    w_i n_i / max_weight is rounded stochastically to steps of delta = 2 clipping_range /
    quantization_range (error < delta per entry, unbiased); the average over clients,
    sum_i (...) max_weight / sum_i n_i, is then off by less than
    N delta max_weight / sum_i n_i.  Float64 throughout, so nothing but the rounding
    counts; the seeded generator (_numpy_seeded, as the client mod) makes it repeat."""
    from flwr.common.secure_aggregation.quantization import dequantize, quantize

    from strategies.secure_aggregation import _numpy_seeded

    clip, qrange, max_weight = 8.0, 4_194_304, 1000
    delta = 2 * clip / qrange
    rng = np.random.default_rng(0)
    n = np.array([7, 300, 1000, 41])
    w = [rng.uniform(-1, 1, size=5000) for _ in n]
    exact = sum(wi * ni for wi, ni in zip(w, n)) / n.sum()
    runs = []
    for seed in (3, 3, 4):
        with _numpy_seeded(seed):
            back = [dequantize(quantize([wi * ni / max_weight], clip, qrange), clip, qrange)[0]
                    for wi, ni in zip(w, n)]
        runs.append(sum(back) * max_weight / n.sum())
    err = np.abs(runs[0] - exact)
    assert err.max() < len(n) * delta * max_weight / n.sum()
    assert err.max() > 0.1 * delta * max_weight / n.sum()  # the rounding is really there
    np.testing.assert_array_equal(runs[0], runs[1])  # the same seed repeats
    assert not np.array_equal(runs[0], runs[2])
    # stochastic rounding is unbiased: over 5,000 entries the mean error is far below delta
    assert abs(float((runs[0] - exact).mean())) < 0.05 * delta * max_weight / n.sum() * len(n)
