"""The Flower strategy stack of each defense: clipping, server- and client-side DP with
their noise, seeds and accountants, the clipping mod, what the auditing strategy records."""

from pathlib import Path
import math

import numpy as np
import pytest
import torch
from flwr.app import (ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord,
                      RecordDict)

from fedaudit.config import load_scenario
from fedaudit.defenses.accounting import gaussian_epsilon


BIG = {"w": torch.zeros(100, 60), "b": torch.zeros(60)}


class FakeGrid:
    def __init__(self, n):
        self.n = n

    def get_node_ids(self):
        return list(range(1, self.n + 1))


def _update(seed, norm):
    g = torch.Generator().manual_seed(seed)
    u = {k: torch.randn(v.shape, generator=g) for k, v in BIG.items()}
    scale = norm / math.sqrt(sum(float((t ** 2).sum()) for t in u.values()))
    return {k: (BIG[k] + scale * t) for k, t in u.items()}


def _reply(node, arrays, *, weight=True, extra=None):
    out = Message(content=RecordDict({"arrays": ArrayRecord(BIG), "config": ConfigRecord({})}),
                  dst_node_id=node, message_type=MessageType.TRAIN)
    metrics = {"num-examples": 10 + node, "train-loss": 0.5, "partition-id": node - 1}
    if weight:
        metrics["dp-weight"] = 1
    metrics.update(extra or {})
    return Message(content=RecordDict({"arrays": ArrayRecord(arrays),
                                       "metrics": MetricRecord(metrics)}), reply_to=out)


def _stack(kind, noise=1.0, clip=1.0, n=4, seed=0):
    from fedaudit.simulation.strategy_factory import make_strategy
    from strategies.auditing import AuditingStrategy

    scen = load_scenario("quickstart", [f"defense.kind={kind}", f"defense.noise_multiplier={noise}",
                                        f"defense.clip_norm={clip}", f"federation.num_clients={n}",
                                        f"scenario.seed={seed}"])
    from fedaudit.probes import ProbeRun
    from fedaudit.probes.update_gnq import UpdateGnq
    from fedaudit.probes.update_norm import UpdateNorm

    rounds = []
    run = ProbeRun(scen, Path("."))  # these probes keep rounds.jsonl keys only
    strat = AuditingStrategy(make_strategy(scen), on_round=lambda r, a, audit: rounds.append(audit),
                             probes=[UpdateNorm(run), UpdateGnq(run)])
    return strat, rounds


def _round(strat, norms, server_round=1, seeds=None):
    msgs = list(strat.configure_train(server_round, ArrayRecord(BIG), ConfigRecord({}),
                                      FakeGrid(len(norms))))
    assert len(msgs) == len(norms)
    seeds = seeds or list(range(len(norms)))
    updates = [_update(s, nm) for s, nm in zip(seeds, norms)]
    replies = [_reply(i + 1, u) for i, u in enumerate(updates)]
    arrays, _ = strat.aggregate_train(server_round, replies)
    return arrays, updates, replies, msgs


def _flat(d):
    return np.concatenate([np.asarray(d[k], dtype=np.float64).ravel() for k in BIG])


def _clipped_mean(updates, clip):
    rows = []
    for u in updates:
        v = _flat({k: u[k].numpy() for k in BIG})
        rows.append(v * min(1.0, clip / np.linalg.norm(v)))
    return np.mean(rows, axis=0)


def test_clip_bounds_every_update_and_aggregate_is_mean_of_clipped(identity):
    strat, rounds = _stack("clip", clip=1.0)
    norms = [0.3, 2.0, 5.0, 0.9]
    arrays, updates, replies, _ = _round(strat, norms)
    for r in replies:  # the wrapper replaced each reply's arrays by the clipped ones
        assert np.linalg.norm(_flat({k: r.content["arrays"][k].numpy() for k in BIG})) \
            <= 1.0 * (1 + 1e-5)
    agg = _flat({k: arrays[k].numpy() for k in BIG})
    np.testing.assert_allclose(agg, _clipped_mean(updates, 1.0), rtol=0, atol=1e-6)
    plain = np.mean([_flat({k: u[k].numpy() for k in BIG}) for u in updates], axis=0)
    assert np.linalg.norm(agg - plain) > 0.1  # the wrapper changed the aggregate
    # the auditing strategy recorded the updates as received (before clipping)
    (audit,) = rounds
    entries = audit.record.entries
    assert list(entries["update_norm"]) == [str(c.partition_id) for c in audit.clients]
    assert list(entries["update_norm"].values()) == pytest.approx(norms, rel=1e-5)
    assert len(entries["gnq_update"]) == len(norms)
    assert all(np.isfinite(v) for v in entries["gnq_update"].values())


def test_dp_server_noise_has_documented_std_and_is_seeded(identity):
    sigma, clip, n = 1.0, 1.0, 4
    norms = [0.5, 3.0, 1.5, 8.0]
    strat, _ = _stack("dp-server", noise=sigma, clip=clip, n=n)
    state = np.random.get_state()
    arrays, updates, _, _ = _round(strat, norms)
    after = np.random.get_state()
    assert all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
               for a, b in zip(state, after))  # the global numpy stream is left as it was
    noise = _flat({k: arrays[k].numpy() for k in BIG}) - _clipped_mean(updates, clip)
    std = sigma * clip / n  # Flower's compute_stdv: noise_multiplier * clip / sampled clients
    assert abs(noise.mean()) < 4 * std / math.sqrt(noise.size)
    assert noise.std() == pytest.approx(std, rel=0.05)

    again, _ = _stack("dp-server", noise=sigma, clip=clip, n=n)
    arrays2, *_ = _round(again, norms)
    other, _ = _stack("dp-server", noise=sigma, clip=clip, n=n, seed=1)
    arrays3, *_ = _round(other, norms)
    assert np.array_equal(_flat({k: arrays[k].numpy() for k in BIG}),
                          _flat({k: arrays2[k].numpy() for k in BIG}))
    assert not np.array_equal(_flat({k: arrays[k].numpy() for k in BIG}),
                              _flat({k: arrays3[k].numpy() for k in BIG}))


def test_dp_server_accountant_composes_one_release_per_round(identity):
    strat, rounds = _stack("dp-server", noise=1.3, n=3)
    for r in (1, 2, 3):
        arrays, *_ = _round(strat, [1.0, 2.0, 3.0], server_round=r, seeds=[r, r + 10, r + 20])
        assert arrays is not None
    spent = strat.strategy.privacy_spent()
    assert spent.num_releases == 3
    assert spent.epsilon == pytest.approx(gaussian_epsilon(1.3, 3, 1e-5), rel=1e-12)
    # a round missing a sampled client's reply releases nothing (Flower's strict mode)
    msgs = list(strat.configure_train(4, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(3)))
    arrays, _ = strat.aggregate_train(4, [_reply(1, _update(1, 1.0)), _reply(2, _update(2, 1.0))])
    assert arrays is None and rounds[-1].note and strat.strategy.privacy_spent().num_releases == 3


def test_dp_server_requires_uniform_weights(identity):
    strat, _ = _stack("dp-server", noise=1.0, n=2)
    list(strat.configure_train(1, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(2)))
    with pytest.raises(ValueError, match="equal client weights"):
        strat.aggregate_train(1, [_reply(1, _update(1, 1.0), weight=False, extra={"dp-weight": 2}),
                                  _reply(2, _update(2, 1.0))])


def test_dp_client_sends_clip_norm_and_adds_noise(identity):
    strat, _ = _stack("dp-client", noise=0.0, clip=0.7, n=3)
    msgs = list(strat.configure_train(1, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(3)))
    assert all(m.content["config"]["clipping_norm"] == 0.7 for m in msgs)
    # with noise 0 the client-side wrapper aggregates as sent (the clients clipped already)
    updates = [_update(s, 0.5) for s in range(3)]
    arrays, _ = strat.aggregate_train(1, [_reply(i + 1, u) for i, u in enumerate(updates)])
    np.testing.assert_allclose(_flat({k: arrays[k].numpy() for k in BIG}),
                               _clipped_mean(updates, 0.7), atol=1e-6)
    noisy, _ = _stack("dp-client", noise=2.0, clip=0.7, n=3)
    list(noisy.configure_train(1, ArrayRecord(BIG), ConfigRecord({}), FakeGrid(3)))
    arrays, _ = noisy.aggregate_train(1, [_reply(i + 1, u) for i, u in enumerate(updates)])
    noise = _flat({k: arrays[k].numpy() for k in BIG}) - _clipped_mean(updates, 0.7)
    assert noise.std() == pytest.approx(2.0 * 0.7 / 3, rel=0.05)


def test_clip_when_asked_mod(identity):
    from strategies.defenses import clip_when_asked_mod

    def make_msg(config):
        return Message(content=RecordDict({"arrays": ArrayRecord(BIG),
                                           "config": ConfigRecord(config)}),
                       dst_node_id=1, message_type=MessageType.TRAIN)

    big_update = _update(0, 4.0)

    def app(msg, ctxt):  # a ClientApp that moves far and also returns an audit record
        return Message(content=RecordDict({"arrays": ArrayRecord(big_update),
                                           "metrics": MetricRecord({"num-examples": 3}),
                                           "audit": ConfigRecord({"gnq-ids": [1]})}),
                       reply_to=msg)

    ctx = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    out = clip_when_asked_mod(make_msg({"clipping_norm": 0.5, "server-round": 1}), ctx, app)
    assert not out.has_error()
    assert np.linalg.norm(_flat({k: out.content["arrays"][k].numpy() for k in BIG})) \
        == pytest.approx(0.5, rel=1e-5)
    assert out.content["audit"]["gnq-ids"] == [1]
    out = clip_when_asked_mod(make_msg({"server-round": 1}), ctx, app)  # no key: untouched
    assert np.linalg.norm(_flat({k: out.content["arrays"][k].numpy() for k in BIG})) \
        == pytest.approx(4.0, rel=1e-5)


def test_auditing_records_dp_steps_of_every_reply(identity):
    from strategies.auditing import AuditingStrategy
    from flwr.serverapp.strategy import FedAvg

    rounds = []
    strat = AuditingStrategy(FedAvg(fraction_evaluate=0.0), on_round=lambda r, a, au: rounds.append(au))
    strat._global = ArrayRecord(BIG)
    bad = {k: torch.full_like(v, float("nan")) for k, v in BIG.items()}
    dp = {"dp-steps": 12, "dp-sample-rate": 0.25}
    strat.aggregate_train(1, [_reply(1, _update(1, 1.0), extra=dp), _reply(2, bad, extra=dp),
                              _reply(3, _update(3, 1.0), extra={"dp-steps": 6,
                                                                "dp-sample-rate": 0.5})])
    (audit,) = rounds  # the rejected reply (partition 1) is accounted too: conservative
    assert audit.dp_steps == {0: 12, 1: 12, 2: 6}
    assert audit.dp_sample_rate == {0: 0.25, 1: 0.25, 2: 0.5}
    assert len(audit.failures) == 1
