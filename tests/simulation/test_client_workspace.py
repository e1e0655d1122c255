"""The ClientApp keeps its parsed scenario, data and model across rounds (per actor),
and a round with the kept model gives exactly what a freshly built one gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

from strategies import wire
from fedaudit.config import load_scenario, to_toml
from fedaudit.data import build_federated_data
from fedaudit.models import model_for
from fedaudit.simulation import client


BASE = ["federation.num_clients=4", "train.local_epochs=1", "audit.gnq.server=false"]
DPSGD = ["defense.kind='dp-sgd'", "defense.noise_multiplier=1.0", "defense.clip_norm=1.0"]


@pytest.fixture(params=["plain", "dp-sgd"])
def scenario_text(request):
    client._WORKSPACES.clear()
    sc = load_scenario("quickstart", BASE + (DPSGD if request.param == "dp-sgd" else []))
    yield to_toml(sc)
    client._WORKSPACES.clear()


def _message(text: str, state: dict, server_round: int, train_seed: int | None = None):
    config = {wire.SCENARIO: text, wire.SERVER_ROUND: server_round}
    if train_seed is not None:
        config[wire.TRAIN_SEED] = train_seed
    return Message(content=RecordDict({wire.ARRAYS: ArrayRecord(state),
                                       wire.CONFIG: ConfigRecord(config)}),
                   dst_node_id=1, message_type=MessageType.TRAIN)


def _context(pid: int) -> Context:
    return Context(run_id=1, node_id=1, node_config={wire.PARTITION_ID: pid},
                   state=RecordDict(), run_config={})


def _reply_state(reply: Message) -> dict[str, np.ndarray]:
    arrays = reply.content[wire.ARRAYS]
    return {k: arrays[k].numpy() for k in arrays}


def test_workspace_is_built_once_per_scenario_and_seed(scenario_text):
    a = client.workspace(scenario_text, None)
    assert client.workspace(scenario_text, None) is a
    b = client.workspace(scenario_text, 7)
    assert b is not a and b.data is a.data  # same data split, another model init
    assert len(client._WORKSPACES) == 2
    for seed in range(10, 10 + client._MAX_WORKSPACES):
        client.workspace(scenario_text, seed)
    assert len(client._WORKSPACES) == client._MAX_WORKSPACES  # bounded, oldest dropped
    assert (scenario_text, None) not in client._WORKSPACES


def test_kept_model_gives_the_same_round_as_a_fresh_one(scenario_text, identity):
    """Round 2 through the kept workspace (model already trained in round 1) equals
    round 2 with the cache emptied (everything rebuilt), bit for bit, GNQ included; also
    under DP-SGD, where Opacus wraps the kept model for the round and unwraps it after."""
    from fedaudit.config import from_toml

    sc = from_toml(scenario_text)
    data = build_federated_data(sc)
    init = {k: v.clone() for k, v in model_for(sc.model, data, seed=sc.seed).state_dict().items()}
    threads = torch.get_num_threads()
    try:
        r1 = client.train(_message(scenario_text, init, 1), _context(0))
        global2 = {k: torch.from_numpy(v.copy()) for k, v in _reply_state(r1).items()}
        kept = client.train(_message(scenario_text, global2, 2), _context(1))
        client._WORKSPACES.clear()
        fresh = client.train(_message(scenario_text, global2, 2), _context(1))
    finally:
        torch.set_num_threads(threads)
    a, b = _reply_state(kept), _reply_state(fresh)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    for key in (wire.GNQ_IDS, wire.GNQ_SCORES):
        assert list(kept.content[wire.AUDIT][key]) == list(fresh.content[wire.AUDIT][key])
    assert kept.content[wire.METRICS][wire.TRAIN_LOSS] == fresh.content[wire.METRICS][wire.TRAIN_LOSS]
    if sc.defense.kind == "dp-sgd":
        assert kept.content[wire.METRICS][wire.DP_STEPS] > 0
    # the reply does not alias the kept model: training again leaves it unchanged
    client.train(_message(scenario_text, global2, 3), _context(2))
    for k, v in _reply_state(fresh).items():
        assert np.array_equal(v, b[k]), k
