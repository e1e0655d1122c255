"""Defenses in a run (Flower + Ray): DP-SGD's epsilon and GNQ, client-side DP clipping on
the clients; (slow) the same seed gives the same numbers, strong DP-SGD against none."""

import json
import math

import numpy as np
import pytest

from fedaudit.config import load_scenario
from fedaudit.defenses.accounting import dpsgd_epsilon, gaussian_epsilon

from tests.helpers.results import result_numbers


TINY = ["federation.num_clients=3", "federation.rounds=2", "train.local_epochs=1",
        "canaries.count=0", "audit.quantization.quantizers=['fp32','int4']",
        "attack.methods=['loss','resmia']"]


def test_dpsgd_end_to_end_reports_epsilon_and_gnq(tmp_path):
    from fedaudit.compare import compare_rows
    from fedaudit.simulation.runner import run

    scen = load_scenario("quickstart", TINY + ["defense.kind=dp-sgd", "defense.noise_multiplier=1.5",
                                               "defense.clip_norm=2.0"])
    run_dir, res = run(scen, tmp_path)
    d = json.loads((run_dir / "results.json").read_text())["defense"]
    assert d["kind"] == "dp-sgd" and d["noise_multiplier"] == 1.5 and d["clip_norm"] == 2.0
    assert isinstance(d["epsilon"], float) and math.isfinite(d["epsilon"]) and d["epsilon"] > 0
    assert len(d["epsilon_per_client"]) == 3 and d["epsilon"] == max(d["epsilon_per_client"])
    lines = [json.loads(x) for x in (run_dir / "rounds.jsonl").read_text().splitlines()]
    for c in range(3):
        steps = sum(r["dp_steps"][str(c)] for r in lines)
        q = lines[0]["dp_sample_rate"][str(c)]
        assert steps == d["steps_per_client"][c]
        assert d["epsilon_per_client"][c] == pytest.approx(dpsgd_epsilon(1.5, q, steps, 1e-5))
        assert res["clients"][c]["dp"]["epsilon"] == d["epsilon_per_client"][c]
    assert d["accounting"] and "Poisson" in d["accounting"]
    with np.load(run_dir / "gnq_samples.npz") as g:  # client GNQ on clipped per-sample grads
        assert len(g["score"]) > 0 and np.all(np.isfinite(g["score"]))
    assert all(v is not None for r in lines for v in r["gnq_update"].values())
    (row,) = compare_rows([run_dir])
    assert row["defense"] == "dp-sgd" and row["epsilon"] == pytest.approx(d["epsilon"])


def test_dp_client_end_to_end_clips_on_the_clients(tmp_path):
    from fedaudit.simulation.runner import run

    scen = load_scenario("quickstart", TINY + ["defense.kind=dp-client",
                                               "defense.noise_multiplier=0.5",
                                               "defense.clip_norm=0.25"])
    run_dir, res = run(scen, tmp_path)
    d = res["defense"]
    assert d["releases"] == 2 and d["epsilon"] == pytest.approx(gaussian_epsilon(0.5, 2, 1e-5))
    assert d["flower_accountant"]["epsilon"] == pytest.approx(d["epsilon"])
    lines = [json.loads(x) for x in (run_dir / "rounds.jsonl").read_text().splitlines()]
    norms = [v for r in lines for v in r["update_norm"].values()]
    assert len(norms) == 6 and max(norms) <= 0.25 * (1 + 1e-4)  # clipped before sending
    assert all(r["failures"] == 0 and r["aggregated"] for r in lines)
    # GNQ keeps working: client-side (ghost auditor) and server-side on the clipped updates
    assert all(np.isfinite(v) for r in lines for v in r["gnq_update"].values())
    with np.load(run_dir / "gnq_samples.npz") as g:
        assert len(g["score"]) > 0 and np.all(np.isfinite(g["score"]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dp-sgd", "dp-server"])
def test_defense_same_seed_same_numbers(tmp_path, kind):
    from fedaudit.simulation.runner import run

    scen = load_scenario("quickstart", TINY + [f"defense.kind={kind}"])
    _, a = run(scen, tmp_path / "a")
    _, b = run(scen, tmp_path / "b")
    assert result_numbers(a) == result_numbers(b)


@pytest.mark.slow
def test_defense_scenarios_none_vs_strong_dpsgd(tmp_path):
    from fedaudit.simulation.runner import run

    _, none = run(load_scenario("defense-none"), tmp_path)
    _, dp = run(load_scenario("defense-dpsgd", ["defense.noise_multiplier=4"]), tmp_path)
    assert none["attacks"]["loss"]["auc"] > 0.58
    assert dp["attacks"]["loss"]["auc"] < none["attacks"]["loss"]["auc"] - 0.05
    assert isinstance(dp["defense"]["epsilon"], float)
