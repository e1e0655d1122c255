"""The one-run DP audit in a run (Flower + Ray): sample and client level into results.json,
dp_canaries.npz and the report; the gradient level's canary coordinates recorded every
round."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedaudit.config import load_scenario
from fedaudit.data import build_federated_data


@pytest.mark.parametrize("name, level", [("defense-none", "sample"),
                                         ("defense-dpserver", "client")])
def test_dp_audit_end_to_end(tmp_path, name, level):
    """Through Flower + Ray: results.json dp_audit, dp_canaries.npz, no canary scored by
    the membership attacks, the report's card."""
    from fedaudit.simulation.runner import run

    scen = load_scenario(name, ["audit.dp.canaries=40", "federation.rounds=2",
                                "train.local_epochs=2", "audit.quantization.enabled=false",
                                "attack.methods=['loss']"])
    run_dir, res = run(scen, tmp_path)
    a = json.loads((run_dir / "results.json").read_text())["dp_audit"]
    assert a["canaries"] == 40 and a["guesses"] == 20 and a["level"] == level
    assert a["claimed_epsilon"] == res["defense"]["epsilon"]
    with np.load(run_dir / "dp_canaries.npz") as z:
        assert len(z["score"]) == 40 and int((z["guess"] != 0).sum()) == 20
        if level == "sample":
            with np.load(run_dir / "scores.npz") as sc:
                assert not np.isin(z["sample_id"], sc["sample_id"]).any()
        else:  # the recorder saw only the real clients
            assert all(set(r["update_norm"]) <= {"0", "1", "2", "3", "4"}
                       for r in map(json.loads,
                                    (run_dir / "rounds.jsonl").read_text().splitlines()))
    from fedaudit.report import write_report

    html = write_report(run_dir).read_text()
    assert "empirical lower bound" in html


#: the white-box counterpart: 2 clients of 100, batch 50 (Poisson rate 1/2), 50 local
#: epochs = 100 DP-SGD steps each in one round, 1,000 gradient canaries; told noise 11:


def test_gradient_dp_audit_end_to_end(tmp_path):
    """audit.dp.level = "gradient" through Flower + Ray: the auditing strategy records the
    sent updates at the canary coordinates each round, the audit scores them and the
    global model; without noise the included canaries stand out."""
    from fedaudit.dp_audit.gradient import canaries_for_model
    from fedaudit.models import model_for
    from fedaudit.rundir.layout import dp_gradient_round_path
    from fedaudit.simulation.runner import run

    scen = load_scenario("dp-audit", ["data.dataset=digits", "data.max_samples=600",
                                      "federation.num_clients=3", "federation.rounds=2",
                                      "train.local_epochs=2", "train.batch_size=50",
                                      "audit.dp.canaries=60", "defense.noise_multiplier=0"])
    run_dir, res = run(scen, tmp_path)
    a = json.loads((run_dir / "results.json").read_text())["dp_audit"]
    assert a["level"] == "gradient" and a["canaries"] == 60 and a["guesses"] == 30
    assert a["claimed_epsilon"] == "inf" == res["defense"]["epsilon"]
    assert a["global"]["canaries"] == 60 and "view" in a["global"]
    d = build_federated_data(scen)
    can, _ = canaries_for_model(60, model_for(scen.model, d, seed=scen.seed), 3, scen.seed)
    for r in (1, 2):  # every client's value at every canary coordinate, each round
        with np.load(dp_gradient_round_path(run_dir, r)) as z:
            assert sorted(set(z["client"].tolist())) == [0, 1, 2]
            assert len(z["value"]) == 3 * 60 and np.isfinite(z["value"]).all()
    with np.load(run_dir / "dp_canaries.npz") as z:
        assert np.array_equal(z["coordinate"], can.coord)
        assert np.array_equal(z["included"].astype(bool), can.included)
        # no noise: a drawn canary moves its coordinate by lr * clip / (q n) per draw,
        # far beyond the real gradients' difference between clients at that coordinate
        assert a["correct"] >= 0.9 * a["guesses"]
        assert a["epsilon_lower_bound"] > 0 and a["mu_lower_bound"] > 0
