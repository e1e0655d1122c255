"""Smoke test of experiments/rqn_validation.py (slow: trains a few synthetic runs)."""

import json
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT


@pytest.mark.slow
def test_rqn_validation_writes_spearman_and_the_table(tmp_path):
    out = tmp_path / "rqn.json"
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "rqn_validation.py"),
                           "--settings", "synthetic", "--runs", "4", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    syn = res["settings"]["synthetic"]
    assert [e["quantizer"] for e in syn["table"]] == res["quantizers"]
    assert set(syn["spearman"]) == {"rqn_vs_mis_baseline", "rqn_vs_loss_auc",
                                    "rqn_vs_loss_tpr_1pct", "rqn_vs_lira_auc",
                                    "rqn_vs_lira_tpr_1pct", "rqn_vs_test_accuracy"}
    for v in syn["spearman"].values():
        assert v["n"] == 8 and (v["rho"] is None or -1 <= v["rho"] <= 1)
    assert "synthetic:rqn_vs_mis_baseline" in res["spearman"]
    assert "| fp32 |" in proc.stdout


def test_rqn_validation_rejects_an_unknown_setting():
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "rqn_validation.py"),
                           "--settings", "cifar"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "--settings: unknown cifar; allowed: synthetic, digits, mnist" in proc.stderr
