"""fedaudit.servers: which server a scenario has, the model it sends, what the imprint
server reads back (against the block's update computed here on explicit states), and a
server kind registered from outside with its own table."""

import numpy as np
import pytest
import torch

from attacks.imprint import BLOCK_BIAS, BLOCK_WEIGHT, block_update
from fedaudit.config import ScenarioError, load_scenario
from fedaudit.data import build_federated_data
from fedaudit.options import option
from fedaudit.servers import SERVERS, Server, register_server, served_model, server_of
from fedaudit.servers.honest import HonestButCurious
from fedaudit.servers.imprint import ImprintServer

DIGITS = ["data.dataset=digits", "data.client_samples=4", "train.batch_size=4",
          "federation.num_clients=4", "federation.secagg.num_shares=3",
          "federation.secagg.reconstruction_threshold=2"]


def test_the_scenario_chooses_its_server():
    assert isinstance(server_of(load_scenario("quickstart")), HonestButCurious)
    s = load_scenario("malicious-server", DIGITS)
    assert isinstance(server_of(s), ImprintServer) and server_of(s).malicious
    off = load_scenario("malicious-server", [*DIGITS, "imprint.enabled=false"])
    assert isinstance(server_of(off), HonestButCurious)
    assert server_of(s).threat_model["position"] == "malicious server"


def test_block_update_is_the_difference_of_the_blocks_first_layer():
    sent = {BLOCK_WEIGHT: torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
            BLOCK_BIAS: torch.tensor([0.5, -0.5]), "1.w": torch.zeros(1)}
    after = {BLOCK_WEIGHT: torch.tensor([[1.5, 2.0], [3.0, 3.0]]),
             BLOCK_BIAS: torch.tensor([0.25, -0.5]), "1.w": torch.ones(1)}
    dw, db = block_update(sent, after)
    assert dw.dtype == np.float64 and db.dtype == np.float64  # float32 differences, exact
    np.testing.assert_array_equal(dw, [[0.5, 0.0], [0.0, -1.0]])
    np.testing.assert_array_equal(db, [-0.25, 0.0])
    with pytest.raises(KeyError, match="not a model with an imprint block"):
        block_update({"w": torch.zeros(1)}, {"w": torch.zeros(1)})


def test_the_imprint_server_reads_a_lone_sample_back_from_one_sgd_step():
    """One sample x (the digits' first client's first, whose mean pixel lies above the
    lowest threshold): the SGD step moves the block's first layer by -lr g (x, 1) in every
    bin x reaches, so the one candidate is x.  The float32 weights round each difference
    (about 1e-7 of x here, measured over all 16 samples of this federation); 1e-5 leaves
    two orders of magnitude for other CPUs' summation orders."""
    s = load_scenario("malicious-server", [*DIGITS, "imprint.bins=8", "imprint.gain=1000"])
    data = build_federated_data(s)
    model = served_model(s, data, seed=0)
    sent = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.from_numpy(data.x[data.clients[0][:1]].copy())
    y = torch.from_numpy(data.y[data.clients[0][:1]].copy()).long()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    out = server_of(s).read_back(sent, model.state_dict(), tuple(x.shape[1:]))
    assert float(x.mean()) > float(-sent[BLOCK_BIAS][0]) * 1000  # above c_1 = -b_1 * gain
    assert len(out.images) == 1 and out.bias_update.shape == (8,)
    np.testing.assert_allclose(out.images[0], x[0].numpy(), rtol=0, atol=1e-5)


class ZeroFirstLayer(Server):
    """A malicious server that sends the task model with its first layer zeroed."""

    kind = "ext-zero"
    malicious = True
    options = {"ext_zero": {"enabled": option(bool, False, "zero the first layer")}}

    def active(self, scenario):
        return scenario.stages["ext_zero"]["enabled"]

    def serve(self, model, scenario, data):
        with torch.no_grad():
            next(model.parameters()).zero_()
        return model


def test_a_server_registered_from_outside_declares_its_table_and_serves_its_model():
    register_server(ZeroFirstLayer)
    try:
        s = load_scenario("quickstart", ["ext_zero.enabled=true", "data.dataset=digits"])
        assert isinstance(server_of(s), ZeroFirstLayer)
        first = next(served_model(s, build_federated_data(s), seed=0).parameters())
        assert not first.any()
        with pytest.raises(ScenarioError, match="ext_zero.nope"):
            load_scenario("quickstart", ["ext_zero.nope=1"])
    finally:
        SERVERS.unregister(ZeroFirstLayer.kind)


def test_a_server_that_is_not_one_or_declares_a_loose_option_is_refused():
    with pytest.raises(TypeError, match="must be a Server instance"):
        SERVERS.register("ext-bad", object())

    class Loose(Server):
        kind = "ext-loose"
        options = {"ext_loose": {"enabled": False}}

    with pytest.raises(TypeError, match=r"table \[ext_loose\]: option 'enabled' must be"):
        register_server(Loose)
    assert "ext-loose" not in SERVERS and "ext-bad" not in SERVERS
