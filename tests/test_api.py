"""The Python API, with plug-ins registered in this process (no package file touched)."""

import numpy as np
import pytest
import torch

import fedaudit
from attacks import register_attack
from fedaudit.config import ScenarioError, schema
from fedaudit.data import DATASETS, Dataset, register_dataset
from fedaudit.quant import QUANTIZERS, register_quantizer
from attacks.membership.registry import ATTACKS
from fedaudit.options import option


@pytest.fixture()
def plugins():
    """A dataset, an attack with an option and a quantizer, registered here."""

    @register_dataset("api-stripes")
    def stripes(cfg):
        rng = np.random.default_rng(0)
        y = np.arange(200) % 2
        x = rng.random((200, 1, 8, 8)).astype(np.float32) * 0.5
        x[y == 1, :, ::2, :] += 0.5  # class 1: horizontal stripes
        return Dataset("api-stripes", x.clip(0, 1), y.astype(np.int64), ("plain", "stripes"))

    @register_attack("api-top", label="top-prob",
                     options={"power": option(float, 1.0, "exponent", min=0.0)})
    def top(oracle, x, y, *, power=1.0):
        return oracle.predict_proba(x).max(axis=1) ** power

    @register_quantizer("api-half", bits=16)
    def half(weight, reference):
        return weight.to(torch.float16).to(weight.dtype)

    yield
    DATASETS.unregister("api-stripes")
    ATTACKS.unregister("api-top")
    QUANTIZERS.unregister("api-half")


def test_schema_choices_come_from_the_registries(plugins):
    s = schema()
    assert "api-stripes" in s["data"]["dataset"].choices()
    assert "api-top" in s["attack"]["methods"].item_choices()
    assert set(s["attack.api-top"]) == {"power"}  # the attack's options are its table
    assert set(s["attack.resmia"]) == {"steps", "sizes", "upsample", "score", "label", "scale",
                                       "factor", "min_size"}
    with pytest.raises(ScenarioError, match="unknown quantizer 'int3'; allowed: .*api-half"):
        fedaudit.validate({"audit.quantization": {"quantizers": ["int3"]}})
    with pytest.raises(ScenarioError, match=r"attack.api-top.power = -1.0: out of range"):
        fedaudit.validate({"attack.api-top": {"power": -1.0}})


def test_registry_lookups_name_what_is_allowed():
    with pytest.raises(ValueError, match="unknown dataset 'nope'; allowed: .*digits.*npz"):
        DATASETS.get("nope")
    assert QUANTIZERS.accepts("ternary-sparse37") and not QUANTIZERS.accepts("ternary-sparse0")
    assert QUANTIZERS.get("ternary-sparse37").sparsity == 0.37
    with pytest.raises(ValueError, match="already registered"):
        register_attack("loss")(lambda oracle, x, y: x)


@pytest.mark.e2e
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
