"""``fedaudit compare --csv / --json``: byte for byte what the layout planner's version wrote,
whatever the terminal's width.  No training: fake finished runs."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from fedaudit import cli

from tests.helpers.fake_runs import QUANTIZERS


#: rows of a sweep (a point, grid values, a failed point, inf, nan, an audit lower bound)
SYNTHETIC = [
    {"point": 1, "train.lr": 0.05, "audit.quantization.quantizers": ["fp32", "binary"],
     "run": "quickstart-defended-20250101-120000", "scenario": "quickstart-defended",
     "defense": "dp-sgd", "epsilon": 3.21, "epsilon_lb": 1.9224, "release": "global",
     "status": "ok", "test_accuracy": 0.9123, "loss_auc": 0.61, "loss_tpr_1pct_fpr": 0.02,
     "resmia_auc": 0.6234, "resmia_tpr_1pct_fpr": 0.031, "rqn_mean": math.inf,
     "insider_best": 0.7},
    {"point": 2, "train.lr": 0.1, "audit.quantization.quantizers": ["fp32"],
     "run": "quickstart-defended-20250101-130000", "scenario": "quickstart-defended",
     "defense": "none", "epsilon": None, "release": "global", "status": "failed",
     "test_accuracy": math.nan, "error": "RuntimeError: client actor died"},
]

EXPECTED_CSV = """\
point,train.lr,audit.quantization.quantizers,run,scenario,defense,epsilon,epsilon_lb,release,status,test_accuracy,resmia_auc,resmia_tpr_1pct_fpr,loss_auc,loss_tpr_1pct_fpr,rqn_mean,insider_best,error
1,0.05,"['fp32', 'binary']",quickstart-defended-20250101-120000,quickstart-defended,dp-sgd,3.21,1.9224,global,ok,0.9123,0.6234,0.031,0.61,0.02,inf,0.7,
2,0.1,['fp32'],quickstart-defended-20250101-130000,quickstart-defended,none,,,global,failed,nan,,,,,,,RuntimeError: client actor died
"""

EXPECTED_JSON = """[
  {
    "point": 1,
    "train.lr": 0.05,
    "audit.quantization.quantizers": [
      "fp32",
      "binary"
    ],
    "run": "quickstart-defended-20250101-120000",
    "scenario": "quickstart-defended",
    "defense": "dp-sgd",
    "epsilon": 3.21,
    "epsilon_lb": 1.9224,
    "release": "global",
    "status": "ok",
    "test_accuracy": 0.9123,
    "resmia_auc": 0.6234,
    "resmia_tpr_1pct_fpr": 0.031,
    "loss_auc": 0.61,
    "loss_tpr_1pct_fpr": 0.02,
    "rqn_mean": "inf",
    "insider_best": 0.7,
    "error": null
  },
  {
    "point": 2,
    "train.lr": 0.1,
    "audit.quantization.quantizers": [
      "fp32"
    ],
    "run": "quickstart-defended-20250101-130000",
    "scenario": "quickstart-defended",
    "defense": "none",
    "epsilon": null,
    "epsilon_lb": null,
    "release": "global",
    "status": "failed",
    "test_accuracy": "nan",
    "resmia_auc": null,
    "resmia_tpr_1pct_fpr": null,
    "loss_auc": null,
    "loss_tpr_1pct_fpr": null,
    "rqn_mean": null,
    "insider_best": null,
    "error": "RuntimeError: client actor died"
  }
]
"""


def test_csv_and_json_are_unchanged():
    from fedaudit.compare import align, to_csv, to_json

    rows = align(SYNTHETIC)
    assert to_csv(rows) == EXPECTED_CSV
    assert to_json(rows) == EXPECTED_JSON
    assert to_csv([]) == "run,scenario,defense,epsilon,release,status,test_accuracy\n"
    assert to_json([]) == "[]\n"


@pytest.mark.parametrize("fmt", ["--csv", "--json"])
def test_csv_and_json_ignore_the_width(two_runs, capsys, monkeypatch, fmt):
    outs = []
    for columns in ("40", "80", "1000"):
        monkeypatch.setenv("COLUMNS", columns)
        assert cli.main(["compare", *map(str, two_runs), "--quantized", fmt]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2]
    rows = (list(csv.DictReader(io.StringIO(outs[0]))) if fmt == "--csv"
            else json.loads(outs[0]))
    assert len(rows) == 2 * (1 + len(QUANTIZERS))  # one row per release, at any width
