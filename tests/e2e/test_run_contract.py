"""The run directory's contract (docs/guide.md section 4, "What a run leaves") through the real Flower
simulation runtime on Ray (no mocks); (slow) the same seed gives the same numbers."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fedaudit.config import from_toml, load_scenario
from fedaudit.simulation.runtime import NOTE

from tests.helpers.docs import documented_results_keys, documented_run_files
from tests.helpers.results import result_numbers

TINY = ["federation.num_clients=3", "federation.rounds=2", "train.local_epochs=1",
        "canaries.count=2", "canaries.clients=[1]",
        "audit.quantization.quantizers=['fp32', 'int4', 'ternary', 'binary']"]


def check_run_dir(run: Path, rounds: int, clients: int) -> dict:
    """The run-directory and results.json contract of docs/guide.md sections 4 and 5."""
    scenario = from_toml((run / "scenario.toml").read_text())
    assert scenario.federation.rounds == rounds
    lines = (run / "rounds.jsonl").read_text().splitlines()
    assert [json.loads(line)["round"] for line in lines] == list(range(1, rounds + 1))
    ckpts = sorted((run / "checkpoints").glob("round-*.pt"))
    assert len(ckpts) == rounds
    state = torch.load(ckpts[-1], weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    log = (run / "run.log").read_text(encoding="utf-8")
    # Flower's multi-line deprecation banner is replaced by fedaudit's one explained line
    assert "DEPRECATED FEATURE" not in log and "deprecated feature" not in log
    assert log.count(NOTE) == 1

    res = json.loads((run / "results.json").read_text())
    # docs/guide.md sections 4 and 5 name everything a real run leaves
    assert set(res) - documented_results_keys() == set(), "results.json keys the guide omits"
    left = {p.name for p in run.iterdir() if not p.name.startswith(".")}
    assert left - documented_run_files() == set(), "run-directory entries the guide omits"
    for key in ("fedaudit_version", "seed", "scenario", "model", "rounds", "clients", "attacks",
                "quantization", "rqn_vs_attack", "timing"):
        assert key in res, key
    assert set(res["model"]) >= {"test_accuracy", "test_loss"}
    for r in res["rounds"]:
        assert set(r) >= {"round", "test_accuracy", "train_loss", "clients", "failures"}
    assert len(res["clients"]) == clients
    for c in res["clients"]:
        assert set(c) >= {"client", "num_examples", "gnq", "attacks"}
        assert set(c["gnq"]) >= {"update_total", "update_per_round", "sample_mean", "sample_max"}
        assert len(c["gnq"]["update_per_round"]) == rounds
        for m in ("resmia", "loss", "entropy", "mentropy", "confidence"):
            assert set(c["attacks"][m]) >= {"auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr",
                                            "fpr_at_80pct_tpr"}
    for m, v in res["attacks"].items():
        assert set(v) >= {"auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "fpr_at_80pct_tpr",
                          "queries_per_sample", "seconds_per_sample"}
    assert res["attacks"]["loss"]["queries_per_sample"] == 1
    for q in res["quantization"]:
        assert set(q) >= {"quantizer", "bits", "sparsity", "rqn", "rqn_runs", "rqn_q25",
                          "rqn_q75", "n_kept", "test_accuracy", "attacks"}
        assert len(q["rqn_runs"]) == 1 and q["rqn"] == q["rqn_runs"][0]
        assert isinstance(q["rqn"], float) or q["rqn"] == "inf"
    assert set(res["timing"]) >= {"total_seconds", "train_seconds", "audit_seconds",
                                  "attack_seconds"}

    with np.load(run / "gnq_samples.npz") as g:
        assert set(g.files) == {"sample_id", "client", "round", "epoch", "score", "canary"}
        assert set(g["epoch"].tolist()) == {1}  # TINY trains one local epoch
        assert len(g["score"]) > 0 and np.all(np.isfinite(g["score"]))
        assert g["canary"].sum() > 0
    with np.load(run / "scores.npz") as s:
        assert set(s.files) >= {"target", "method", "sample_id", "client", "member", "score"}
        assert set(s["target"]) >= {"global", "quantized:binary"}
    return res


def test_cli_run_tiny_scenario_satisfies_contract(tmp_path):
    args = [sys.executable, "-m", "fedaudit.cli", "run", "quickstart", "--out", str(tmp_path)]
    for s in TINY:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = Path(proc.stdout.strip().splitlines()[-1])
    assert run.parent == tmp_path and run.name.startswith("quickstart-")
    res = check_run_dir(run, rounds=2, clients=3)
    assert res["model"]["test_accuracy"] > 0.5  # two rounds on digits learn something
    assert "canaries" in res and len(res["canaries"]["samples"]) == 2


@pytest.mark.slow
def test_same_seed_same_numbers(tmp_path):
    from fedaudit.simulation.runner import run

    scenario = load_scenario("quickstart", TINY)
    _, a = run(scenario, tmp_path / "a")
    _, b = run(scenario, tmp_path / "b")
    assert result_numbers(a) == result_numbers(b)
