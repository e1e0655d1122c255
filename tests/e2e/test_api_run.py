"""The Python API runs a scenario (Flower + Ray) with plug-ins registered in this process:
the clients load the dataset registered here, the attack and the quantizer reach
results.json, scores.npz and the report."""

import numpy as np

import fedaudit

from tests.helpers.api_plugins import plugins  # noqa: F401 (a fixture)


def test_run_uses_plugins_registered_in_this_process(plugins, tmp_path):
    run = fedaudit.run(
        {"scenario": {"name": "api"},
         "data": {"dataset": "api-stripes"},
         "federation": {"num_clients": 2, "rounds": 1},
         "model": {"name": "mlp", "width": 4},
         "train": {"local_epochs": 10},
         "audit.quantization": {"quantizers": ["fp32", "api-half"]},
         "attack": {"methods": ["loss", "api-top"]},
         "attack.api-top": {"power": 2.0}},
        out=tmp_path, progress=False)
    res = run.results
    assert run.dir.parent == tmp_path and res["data"]["dataset"] == "api-stripes"
    assert [q["quantizer"] for q in res["quantization"]] == ["fp32", "api-half"]
    assert set(res["attacks"]) == {"loss", "api-top"}
    # the clients (Ray workers) loaded the dataset registered here: no failed reply, and
    # stripes are easy to learn
    assert res["rounds"][0]["failures"] == 0 and res["rounds"][0]["clients"] == [0, 1]
    assert res["model"]["test_accuracy"] > 0.9
    scores = run.scores(as_frame=False)
    top = scores["score"][(scores["method"] == "api-top") & (scores["target"] == "global")]
    assert np.all((top >= 0.25) & (top <= 1.0))  # max prob of 2 classes, squared
    assert fedaudit.load_run(run.dir).results == res
    assert run.report().name == "report.html"
