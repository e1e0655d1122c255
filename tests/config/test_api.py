"""The Python API, with plug-ins registered in this process (no package file touched): the
schema's choices and the registries' errors (a run with them: tests/e2e/test_api_run.py)."""

import pytest

import fedaudit
from attacks import register_attack
from fedaudit.config import ScenarioError, schema
from fedaudit.data import DATASETS
from fedaudit.quant import QUANTIZERS

from tests.helpers.api_plugins import plugins  # noqa: F401 (a fixture)


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
