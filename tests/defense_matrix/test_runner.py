"""Running, recording and resuming a matrix, with the simulation replaced by a fake that
writes a finished run directory from the scenario it is given (no Ray, no training): the
folder, matrix.json's cells, a failing run, and what --resume keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fedaudit.simulation.runner as sim
from fedaudit import cli
from fedaudit.config import ScenarioError, to_toml
from fedaudit.defense_matrix import open_matrix_dir, plan_matrix, run_matrix
from fedaudit.defense_matrix.runner import MATRIX_NAME, PLAN_NAME
from fedaudit.rundir.layout import RESULTS_NAME, SCENARIO_NAME

SCENARIO = "reconstruction-digits"


def _results(scenario) -> dict:
    """What the fake run measured: a figure per defense and role that the test can read
    back (AUC 0.7 without a defense, 0.6 under SecAgg+)."""
    secure = scenario.federation.aggregation != "plain"
    auc = 0.6 if secure else 0.7
    res = {"scenario": scenario.sections(),
           "model": {"test_accuracy": 0.5 if secure else 0.55, "test_loss": 1.0},
           "defense": {"kind": scenario.defense.kind, "epsilon": None}}
    if scenario.attack.enabled:
        res["attack_positions"] = [
            {"position": p, "best_method": "loss", "auc": auc, "tpr_at_1pct_fpr": 0.1,
             "auc_ci": [auc - 0.1, auc + 0.1], "verdict": {"auc": "above chance"}}
            for p in ("outsider", "insider", *(() if secure else ("curious server",)))]
    if scenario.stages["imprint"]["enabled"]:
        res["malicious_server"] = {"share": 0.75, "round": 1, "expected_share": 0.78,
                                   "bins": 256}
    if scenario.stages["active_membership"]["enabled"]:
        res["active_membership"] = {"round": 2, "active": {"auc": 0.9}, "passive": {"auc": 0.5}}
    return res


class FakeSimulation:
    def __init__(self, fail: set[str] = frozenset()):
        self.calls: list[tuple[str, str | None]] = []
        self.counterfactuals: dict[str, Path | None] = {}
        self.fail = set(fail)

    def __call__(self, scenario, out, *, progress=None, resume_dir=None, verbose=False,
                 counterfactual=None):
        key = Path(out).name
        self.calls.append((key, None if resume_dir is None else Path(resume_dir).name))
        self.counterfactuals[key] = counterfactual
        run_dir = Path(resume_dir) if resume_dir else Path(out) / f"{scenario.name}-{len(self.calls)}"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / SCENARIO_NAME).write_text(to_toml(scenario), encoding="utf-8")
        if key in self.fail:
            raise RuntimeError(f"client crash in {key}")
        res = _results(scenario)
        (run_dir / RESULTS_NAME).write_text(json.dumps(res), encoding="utf-8")
        return run_dir, res


@pytest.fixture()
def plan():
    return plan_matrix(SCENARIO, ["none", "secagg+"], ["matrix.servers=['imprint']"],
                       check=False)


def test_a_matrix_writes_each_defense_s_cells_and_cost(tmp_path, plan, monkeypatch):
    fake = FakeSimulation()
    monkeypatch.setattr(sim, "run", fake)
    root = open_matrix_dir(plan, tmp_path / "m", resume=False)
    doc = run_matrix(plan, root, report=False)
    assert [c[0] for c in fake.calls] == ["none--main", "none--imprint", "secagg+--main",
                                          "secagg+--imprint"]
    # a server run is compared with its defense's honest main run (the same federation)
    assert fake.counterfactuals["none--main"] is None
    assert fake.counterfactuals["none--imprint"].parent.name == "none--main"
    assert fake.counterfactuals["secagg+--imprint"].parent.name == "secagg+--main"
    assert doc == json.loads((root / MATRIX_NAME).read_text())
    assert (root / "report.html").is_file() and (root / PLAN_NAME).is_file()
    none, secagg = doc["defenses"]
    assert (none["status"], none["test_accuracy"], secagg["test_accuracy"]) == (
        "finished", 0.55, 0.5)
    each = none["cells"]["curious server (each update)"]["membership"]
    # the fake run's old word, read conservatively (above chance was a leak by its test)
    assert (each["figure"], each["verdict"], each["chance"]) == (0.7, "leaks", 0.5)
    assert each["interval"] == pytest.approx([0.6, 0.8], abs=1e-15)  # 0.7 +- 0.1 in float64
    assert secagg["cells"]["curious server (each update)"]["membership"]["status"] == \
        "not possible"
    # the imprint run's own section fills the malicious server's reconstruction cell
    assert none["cells"]["malicious server"]["reconstruction"]["figure"] == 0.75
    assert none["runs"]["imprint"]["dir"].startswith("runs/none--imprint/")
    assert doc["runs_finished"] == doc["runs"] == 4


def test_a_failing_run_is_recorded_and_resume_retries_only_it(tmp_path, plan, monkeypatch):
    fake = FakeSimulation(fail={"secagg+--main"})
    monkeypatch.setattr(sim, "run", fake)
    root = open_matrix_dir(plan, tmp_path / "m", resume=False)
    doc = run_matrix(plan, root, report=False)
    secagg = doc["defenses"][1]
    assert secagg["status"] == "failed" and "cells" not in secagg
    assert secagg["runs"]["main"]["error"] == "RuntimeError: client crash in secagg+--main"
    assert secagg["runs"]["imprint"]["status"] == "finished"  # the matrix went on
    first = doc["defenses"][0]["runs"]["main"]["seconds"]

    retry = FakeSimulation()
    monkeypatch.setattr(sim, "run", retry)
    root = open_matrix_dir(plan, tmp_path / "m", resume=True)
    doc = run_matrix(plan, root, report=False)
    # only the failed run again, continued in its own directory
    partial = Path(secagg["runs"]["main"]["dir"]).name
    assert retry.calls == [("secagg+--main", partial)]
    assert [d["status"] for d in doc["defenses"]] == ["finished", "finished"]
    assert doc["defenses"][0]["runs"]["main"]["seconds"] == first  # kept from the first


def test_the_folder_is_checked_before_anything_runs(tmp_path, plan, monkeypatch):
    monkeypatch.setattr(sim, "run", FakeSimulation())
    with pytest.raises(ScenarioError, match="--resume needs --out DIR"):
        open_matrix_dir(plan, None, resume=True)
    with pytest.raises(ScenarioError, match="holds no matrix-plan.json"):
        open_matrix_dir(plan, tmp_path / "empty", resume=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ScenarioError, match="exists and is not an empty folder"):
        open_matrix_dir(plan, other, resume=False)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    root = open_matrix_dir(plan, tmp_path / "m", resume=False)
    with pytest.raises(ScenarioError, match="holds a matrix already .* add --resume"):
        open_matrix_dir(plan, root, resume=False)
    bigger = plan_matrix(SCENARIO, ["none", "secagg+", "sparsify"],
                         ["matrix.servers=['imprint']"], check=False)
    with pytest.raises(ScenarioError, match=r"not the same matrix: defenses was \['none', "
                                            r"'secagg\+'\]"):
        open_matrix_dir(bigger, root, resume=True)


def test_the_command_fails_in_one_line_with_exit_code_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sim, "run", FakeSimulation())
    assert cli.main(["matrix", SCENARIO, "--defenses", "none,nope", "--out",
                     str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedaudit: error: matrix.defenses: unknown defense 'nope'")
    assert "\n" not in err and not (tmp_path / "m").exists()  # nothing written
