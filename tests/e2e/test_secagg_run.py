"""A run through Flower's SecAgg+ (federation.aggregation = "secagg+") against the same
scenario and seed with plain aggregation: round 1's global model differs only by SecAgg+'s
quantisation, within its bound; the server kept no client's update."""

import json

import numpy as np
import pytest

from fedaudit.config import from_toml
from fedaudit.data import build_federated_data
from fedaudit.rundir import load_checkpoint
from tests.helpers.runs import run_cli

SMALL = ["federation.num_clients=4", "federation.rounds=1", "federation.secagg.num_shares=3",
         "federation.secagg.reconstruction_threshold=2", "attack.enabled=false",
         "audit.quantization.enabled=false"]


@pytest.mark.slow  # two runs (about 45 s); the SecAgg+ path itself runs in the default
# suite through tests/e2e/test_imprint_run.py and test_stage_writes_runs.py
def test_secagg_round_equals_fedavg_within_the_quantisation(tmp_path):
    _, secure = run_cli("secagg", tmp_path / "secagg", SMALL)
    _, plain = run_cli("secagg", tmp_path / "plain", [*SMALL, "federation.aggregation=plain"])
    res = json.loads((secure / "results.json").read_text())
    assert res["scenario"]["federation"]["aggregation"] == "secagg+"
    assert not (secure / "updates").exists()
    (line,) = [json.loads(s) for s in (secure / "rounds.jsonl").read_text().splitlines()]
    assert line["aggregated"] and line["clients"] == [0, 1, 2, 3] and line["failures"] == 0

    scenario = from_toml((secure / "scenario.toml").read_text())
    sa = scenario.federation.secagg
    n = [len(ids) for ids in build_federated_data(scenario).clients]
    a, b = (load_checkpoint(run / "checkpoints" / "round-0001.pt") for run in (secure, plain))
    assert a.keys() == b.keys()
    # Each client quantises its weighted model w * n_i / max_weight with stochastic
    # rounding to steps of delta = 2 * clipping_range / quantization_range (error < delta
    # each); the server divides the sum by sum_i n_i / max_weight.  Bound per parameter:
    # N * delta * max_weight / sum_i n_i, plus float32 rounding of the two averages
    # (a few ulps of |w| <= 1 here: 1e-6).
    delta = 2 * sa.clipping_range / sa.quantization_range
    bound = len(n) * delta * sa.max_weight / sum(n) + 1e-6
    worst = max(float(np.abs(a[k].double().numpy() - b[k].double().numpy()).max()) for k in a)
    assert 0 < worst <= bound, (worst, bound)
