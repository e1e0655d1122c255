"""The malicious server's stage and model: what validation refuses (one line), and the
model every side builds (the block in front of the task model only when asked)."""

import pytest
import torch

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.data import build_federated_data
from fedaudit.models.registry import model_for
from fedaudit.servers import served_model

DIGITS = ["data.dataset=digits", "data.client_samples=4", "train.batch_size=4",
          "federation.num_clients=4", "federation.secagg.num_shares=3",
          "federation.secagg.reconstruction_threshold=2"]


@pytest.mark.parametrize("overrides, message", [
    (["imprint.round=2"], r"imprint.round = 2: round 2 does not exist; allowed: 1..1$"),
    (["reconstruction.enabled=true"], "imprint.enabled = true changes the model the "
                                      "clients train; .*turn one of them off$"),
    (["imprint.bins=0"], "imprint.bins"),
    (["imprint.gain=0"], "imprint.gain"),
])
def test_bad_imprint_tables_are_refused_in_one_line(overrides, message):
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenario("malicious-server", [*DIGITS, *overrides])
    assert "\n" not in str(err.value)


def test_the_served_model_is_the_task_model_unless_the_block_is_on():
    s = load_scenario("malicious-server", [*DIGITS, "imprint.enabled=false"])
    data = build_federated_data(s)
    plain, served = model_for(s.model, data, seed=3), served_model(s, data, seed=3)
    a, b = plain.state_dict(), served.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    s = load_scenario("malicious-server", [*DIGITS, "imprint.bins=32"])
    served = served_model(s, data, seed=3).state_dict()
    assert served["0.linear0.weight"].shape == (32, 64)
    assert {k[2:] for k in served if k.startswith("1.")} == set(a)
    assert all(torch.equal(served["1." + k], a[k]) for k in a)  # the task model, same seed
