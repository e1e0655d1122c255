"""``fedaudit matrix`` end to end (Flower + Ray): the digits federation of
reconstruction-digits under no defense and under SecAgg+ (the malicious servers' runs are
left out to keep CI short: their runs are ordinary runs, tests/e2e/test_imprint_run.py, and
the merging of their sections is tested on explicit runs, tests/defense_matrix);
matrix.json, the report and each run's directory, then ``--resume`` on the finished
folder, which redoes nothing."""

import json

import torch

from fedaudit import cli
from fedaudit.audit.stages.update_attacks import _initial_state
from fedaudit.config import from_toml
from fedaudit.data import build_federated_data
from fedaudit.rundir import load_checkpoint


def test_the_matrix_of_two_defenses_and_its_resume(tmp_path, capsys):
    out = tmp_path / "m"
    argv = ["matrix", "reconstruction-digits", "--defenses", "none,secagg+", "--out", str(out),
            "--set", "matrix.servers=[]", "--no-report"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.strip() == str(out.resolve())
    doc = json.loads((out / "matrix.json").read_text())
    assert doc["runs_finished"] == doc["runs"] == 2
    none, secagg = doc["defenses"]
    assert (none["status"], secagg["status"]) == ("finished", "finished")
    for d in (none, secagg):  # each run is an ordinary run directory
        for r in d["runs"].values():
            assert (out / r["dir"] / "results.json").is_file()
    each = "curious server (each update)"
    # plain FedAvg: the server sees each update; the digits are rebuilt near-exactly
    assert none["cells"][each]["label leakage"]["figure"] == 1.0
    assert none["cells"][each]["label leakage"]["verdict"] == "leaks"
    assert none["cells"][each]["reconstruction"]["figure"] > 30.0
    assert none["cells"][each]["reconstruction"]["verdict"] == "leaks"
    assert none["cells"][each]["membership"]["chance"] == 0.5
    # 16 members against 16 non-members on a model at chance: the experiment could not
    # have seen an AUC of 0.75, so nothing is painted safe
    for pos in ("outsider", "insider", each):
        cell = none["cells"][pos]["membership"]
        assert cell["verdict"] == "inconclusive", (pos, cell)
        assert cell["detail"]["summary"].startswith("inconclusive")
    assert none["cells"]["outsider"]["membership"]["detail"]["unit"] == "sample"
    assert none["cells"][each]["membership"]["detail"]["unit"] == "client"
    # SecAgg+ hides each update; the round's aggregate still gives its label counts, to
    # the server and to every client
    assert all(c["status"] == "not possible" for f, c in secagg["cells"][each].items()
               if f != "sees")
    for d in (none, secagg):
        for pos in ("curious server (aggregate only)", "insider"):
            assert d["cells"][pos]["label leakage"]["status"] == "measured"
            assert d["cells"][pos]["reconstruction"]["status"] == "measured"
    main = json.loads((out / secagg["runs"]["main"]["dir"] / "results.json").read_text())
    agg = main["label_leakage"]["aggregate"]
    assert agg["rounds"] == [{"round": 1, "clients": [0, 1, 2, 3], "num_examples": 16}]
    assert "pooled" not in main["label_leakage"]  # no client's update was attacked
    # the aggregate's round-1 start is rebuilt from the scenario: it is exactly the model the
    # server sent (as the client-updates probe of the plain run kept it)
    plain = out / none["runs"]["main"]["dir"]
    scenario = from_toml((plain / "scenario.toml").read_text())
    start = _initial_state(scenario, build_federated_data(scenario))
    sent = load_checkpoint(plain / "updates" / "round-0001" / "start.pt")
    assert sorted(start) == sorted(sent)
    assert all(torch.equal(start[k], sent[k]) for k in sent)
    page = (out / "report.html").read_text()
    assert "The matrix at a glance" in page and "SecAgg+" in page

    before = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*/results.json")}
    assert cli.main([*argv, "--resume"]) == 0
    assert "finished earlier, kept" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*/results.json")} == before
    assert json.loads((out / "matrix.json").read_text())["defenses"][0]["cells"] == none["cells"]
