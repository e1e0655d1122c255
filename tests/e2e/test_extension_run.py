"""A run (Flower + Ray) shows the stage, the target kind, the defense, the probe, the
aggregator, the label attack and the family of attacks on updates that
tests/helpers/extension.py registers from outside the package: results.json, scores.npz,
compare, the threat matrix and the report.  The label attack and the family run on the
run's Ray actors (update_attacks.runtime = grid), which import fedaudit afresh: only the
plug-ins carried to them (fedaudit.simulation.plugins) make them known there."""

import numpy as np

import fedaudit
from fedaudit.compare import compare_rows
from fedaudit.config import from_toml
from fedaudit.data import build_federated_data
from fedaudit.models import model_for
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.layout import client_model_path

from tests.helpers.extension import extensions  # noqa: F401 (a fixture)


def test_a_run_shows_the_new_stage_target_and_defense(extensions, tmp_path):
    run = fedaudit.run(
        {"scenario": {"name": "ext"},
         "data": {"max_samples": 400},
         "federation": {"num_clients": 2, "rounds": 1, "strategy": "ext-mean"},
         "model": {"name": "mlp", "width": 4},
         "audit.gnq": {"client": False},
         "audit.quantization": {"enabled": False},
         "attack": {"methods": ["loss"], "targets": ["global", "ext-first-round", "clients"]},
         "defense": {"kind": "ext-clip", "clip_norm": 10.0},
         "audit.ext_round_loss": {"round": 1},
         "label_leakage": {"enabled": True, "methods": ["ext-all-first"]},
         "update_attacks": {"runtime": "grid"},
         "label_leakage.ext-all-first": {"share": 0.5},
         "ext_update_norm": {"enabled": True}},
        out=tmp_path, progress=False)
    res = run.results
    assert res["defense"]["kind"] == "ext-clip"
    # one round: the global model after round 1 is the final one, so all three agree
    auc = res["attacks"]["loss"]["auc"]
    assert res["ext_first_round"]["loss"]["auc"] == auc
    assert res["ext_round_loss"] == {"round": 1, **res["ext_first_round"]["loss"]}
    scores = run.scores()
    targets = set(np.asarray(scores["target"]).tolist())
    assert targets == {"global", "ext-first-round:1", "ext-round-loss:1", "client-model:r1"}
    # the probe: one number per client and round, checked against the kept client models
    # and the initial global model (float32 weights, differences taken in float64: exact)
    (entry,) = res["probes"]["ext-update-max"]
    assert entry["round"] == 1 and sorted(entry["per_client"]) == ["0", "1"]
    scenario = from_toml((run.dir / "scenario.toml").read_text(encoding="utf-8"))
    start = model_for(scenario.model, build_federated_data(scenario),
                      seed=scenario.seed).state_dict()  # the initial global model
    for c, value in entry["per_client"].items():
        sent = load_checkpoint(client_model_path(run.dir, 1, int(c)))
        assert value == max(float((sent[k].double() - v.double()).abs().max())
                            for k, v in start.items())
    # the label attack, on the actors, with its option: half of each update's n samples
    # guessed as class 0, the rest as class 1, scored against the client's true labels
    data = build_federated_data(scenario)
    cases = res["label_leakage"]["cases"]
    assert res["label_leakage"]["methods"] == ["ext-all-first"] and len(cases) == 2
    for case in cases:
        y = data.y[data.clients[case["client"]]]
        n, first = len(y), len(y) // 2
        hits = min(first, int((y == 0).sum())) + min(n - first, int((y == 1).sum()))
        assert case["ext-all-first"]["label_accuracy"] == hits / n
    # the new family, on the actors: each update's norm against the kept client model and
    # the initial global model (float32 weights, sums in float64: equal to float64's
    # rounding of the sum, so compared to 1e-12 relative, far below float32's 6e-8)
    fam = res["ext_update_norm"]
    assert fam["methods"] == ["l2"] and fam["ran_on"].startswith("the run's Ray actors")
    norms = []
    for case in fam["cases"]:
        sent = load_checkpoint(client_model_path(run.dir, 1, case["client"]))
        norms.append(float(np.sqrt(sum(((sent[k].double() - v.double()) ** 2).sum().item()
                                       for k, v in start.items()))))
        assert abs(case["l2"] - norms[-1]) <= 1e-12 * norms[-1]
    assert len(norms) == 2 and fam["pooled"]["l2"] == np.mean([c["l2"] for c in fam["cases"]])
    cell = res["threat_matrix"]["curious server (each update)"]["update norm"]
    assert cell["status"] == "measured" and cell["figure"] == fam["pooled"]["l2"]
    assert res["threat_matrix"]["outsider"]["update norm"]["status"] == "not possible"
    (row,) = compare_rows([run.dir])
    assert row["ext_norm"] == fam["pooled"]["l2"] and "label_accuracy" in row
    html = run.report().read_text(encoding="utf-8")
    assert "LOSS on one round" in html and f"AUC {res['ext_round_loss']['auc']:.3f}" in html
    assert "mean over the updates" in html and f"{fam['pooled']['l2']:.4g}" in html
