"""The threat-model matrix: cells from explicit results.json dicts (what each position can
see, what the run measured), and ``fedaudit compare --matrix`` on fake finished runs."""

from __future__ import annotations

import json

import pytest

from fedaudit import cli
from fedaudit.rundir.threat_matrix import (MEASURED, NOT_MEASURED, NOT_POSSIBLE, POSITIONS,
                                          families, threat_matrix)
from tests.helpers.fake_runs import write_fake_run

POSITIONS_ROWS = [
    {"position": "outsider", "best_method": "loss", "auc": 0.61, "tpr_at_1pct_fpr": 0.02},
    {"position": "insider", "best_method": "rmia", "auc": 0.66, "tpr_at_1pct_fpr": 0.04},
    {"position": "curious server", "best_method": "fedmia", "auc": 0.83,
     "tpr_at_1pct_fpr": 0.2}]
UPDATES = {
    "label_leakage": {"methods": ["bias-count"],
                      "pooled": {"bias-count": {"label_accuracy": 0.83}}},
    "reconstruction": {"methods": ["inverting-gradients"],
                       "pooled": {"inverting-gradients": {"samples": 64, "psnr": 8.7,
                                                          "identifiability": 0.45}}}}
MALICIOUS = {"malicious_server": {"share": 0.734, "round": 1, "expected_share": 0.779,
                                  "bins": 256}}


def _results(aggregation="plain", **extra):
    return {"scenario": {"federation": {"aggregation": aggregation}},
            "attack_positions": POSITIONS_ROWS, **extra}


def test_a_plain_run_fills_what_each_position_measured():
    m = threat_matrix(_results(**UPDATES))
    assert families() == ("membership", "label leakage", "reconstruction", "property inference")
    assert list(m) == list(POSITIONS) and all(list(r) == list(families()) for r in m.values())
    assert m["outsider"]["membership"].figure == 0.61
    assert m["outsider"]["label leakage"].status == NOT_POSSIBLE
    assert m["insider"]["membership"].figure == 0.66
    server = m["curious server (each update)"]
    assert (server["membership"].figure, server["label leakage"].figure,
            server["reconstruction"].figure) == (0.83, 0.83, 8.7)
    assert server["reconstruction"].text == "PSNR 8.7 dB, 45% identifiable"
    # the aggregates are the rounds' models: the insider's figure
    assert m["curious server (aggregate only)"]["membership"].figure == 0.66
    assert m["malicious server"]["reconstruction"].status == NOT_MEASURED


def test_secure_aggregation_makes_each_update_not_possible():
    m = threat_matrix(_results("secagg+", **UPDATES, **MALICIOUS))
    for f in families():
        cell = m["curious server (each update)"][f]
        assert cell.status == NOT_POSSIBLE and "'secagg+' hides" in cell.why
    rec = m["malicious server"]["reconstruction"]
    assert rec.status == MEASURED and rec.figure == 0.734
    assert rec.text == "73% of round 1 near-exact (expected 78%; 256 bins)"


def test_a_run_without_positions_takes_the_released_model_s_best_attack():
    res = {"attacks": {"loss": {"auc": 0.55, "tpr_at_1pct_fpr": 0.01},
                       "rmia": {"auc": 0.59, "tpr_at_1pct_fpr": 0.03}}}
    m = threat_matrix(res)
    assert m["outsider"]["membership"].figure == 0.59
    assert "rmia" in m["outsider"]["membership"].text
    assert m["insider"]["membership"].status == NOT_MEASURED


def test_compare_matrix_lays_runs_side_by_side(tmp_path, capsys):
    plain = write_fake_run(tmp_path / "plain-run", defense="dp-sgd", epsilon=3.0)
    secure = write_fake_run(tmp_path / "secagg-run",
                            scen={"scenario": {"name": "s"},
                                  "federation": {"aggregation": "secagg+"}})
    res = json.loads((secure / "results.json").read_text())
    res.update(MALICIOUS)
    (secure / "results.json").write_text(json.dumps(res))
    assert cli.main(["compare", "--matrix", "--json", str(plain), str(secure)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["run"] for c in out] == ["dp-sgd, plain (plain-run)",
                                       "none, secagg+ (secagg-run)"]
    assert out[1]["matrix"]["malicious server"]["reconstruction"]["figure"] == 0.734
    assert out[1]["matrix"]["curious server (each update)"]["membership"]["status"] \
        == NOT_POSSIBLE
    assert cli.main(["compare", "--matrix", str(plain), str(secure)]) == 0
    table = capsys.readouterr().out
    assert "threat-model matrix" in table and "not possible" in table


def test_compare_matrix_refuses_csv(tmp_path, capsys):
    run = write_fake_run(tmp_path / "r")
    assert cli.main(["compare", "--matrix", "--csv", str(run)]) == 2
    assert "--matrix writes a table or --json" in capsys.readouterr().err


def test_the_report_shows_the_matrix_and_the_malicious_server(tmp_path):
    from fedaudit.report.fig_threats import section_threats
    from fedaudit.rundir.reading import load_run

    run = write_fake_run(tmp_path / "r", scen={"scenario": {"name": "s"},
                                               "federation": {"aggregation": "secagg+"}})
    res = json.loads((run / "results.json").read_text())
    res["malicious_server"] = {**MALICIOUS["malicious_server"], "samples": 64,
                               "near_exact": 47, "aggregation": "secagg+",
                               "near_exact_db": 40.0, "test_accuracy": 0.1}
    (run / "results.json").write_text(json.dumps(res))
    body = section_threats(load_run(run))
    assert "malicious server" in body and "73% of round 1 near-exact" in body
    assert "hides each client&#x27;s update" in body  # the why of a 'not possible' cell
    assert "47 of round 1's 64 samples" in body


def test_membership_cells_carry_the_interval_and_verdict_the_run_measured():
    rows = [{**POSITIONS_ROWS[0], "auc_ci": [0.55, 0.67],
             "verdict": {"auc": "above chance", "tpr_at_1pct_fpr": "above chance"}},
            {**POSITIONS_ROWS[1], "auc_ci": [0.48, 0.84],
             "verdict": {"auc": "not distinguishable from chance"}}]
    m = threat_matrix({"scenario": {"federation": {"aggregation": "secagg+"}},
                       "attack_positions": rows})
    out = m["outsider"]["membership"]
    # a run made before issue 57: its words read conservatively (above chance: leaks)
    assert (out.interval, out.verdict) == ([0.55, 0.67], "leaks")
    assert out.text == "AUC 0.610 [0.550, 0.670], TPR@1%FPR 0.020 (loss)"
    # the aggregate-only server holds the rounds' models: the insider's figure and interval
    agg = m["curious server (aggregate only)"]["membership"]
    assert (agg.figure, agg.interval, agg.verdict) == (0.66, [0.48, 0.84], "inconclusive")
    # an older run's rows have neither: the cells say nothing of them
    old = threat_matrix(_results())["outsider"]["membership"]
    assert old.interval is None and old.verdict is None and "[" not in old.text
