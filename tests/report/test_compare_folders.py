"""``fedaudit compare`` with folders of runs as arguments: a sweep's folder, a folder mixed
with runs, folders without a run.  No training: fake finished runs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from fedaudit import cli

from tests.helpers.fake_runs import write_fake_run
from tests.report.tables import check_fits, flat, transposed


def _fake_sweep(tmp_path: Path, monkeypatch, grid: str = "train.lr=0.2,0.05,0.1",
                fail: float | None = 0.05) -> Path:
    """``run_sweep`` with the runner replaced by one writing fake finished runs."""
    import fedaudit.simulation.runner as runner
    import fedaudit.sweep as sweep
    from fedaudit.rundir import create_run_dir

    def fake_run(scenario, out, progress=None, verbose=False):
        run_dir = create_run_dir(out, scenario.name)
        if scenario.train.lr == fail:
            raise RuntimeError("client actor died")
        write_fake_run(run_dir, scen=scenario.sections(), quantizers=["fp32", "ternary-sparse90"])
        return run_dir, json.loads((run_dir / "results.json").read_text())

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(sweep, "check_data", lambda scenario: None)
    monkeypatch.chdir(tmp_path)
    sweep_dir, rows = sweep.run_sweep("quickstart", [grid], ["federation.num_clients=3"],
                                      out="sweeps", report=False)
    assert sweep_dir.is_absolute() and sweep_dir == (tmp_path / "sweeps" / sweep_dir.name).resolve()
    return sweep_dir


def test_sweep_dir_is_absolute_and_compare_accepts_it(tmp_path, monkeypatch, capsys):
    sweep_dir = _fake_sweep(tmp_path, monkeypatch)
    runs = {json.loads(p.read_text())["scenario"]["train"]["lr"]: p.parent
            for p in sweep_dir.glob("*/results.json")}
    assert sorted(runs) == [0.1, 0.2]  # the 0.05 point failed

    assert cli.main(["compare", "sweeps/" + sweep_dir.name, "--csv"]) == 0  # relative works too
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["point"], r["train.lr"]) for r in rows] == [("1", "0.2"), ("3", "0.1")]
    assert [r["run"] for r in rows] == [runs[0.2].name, runs[0.1].name]
    assert list(rows[0])[:3] == ["point", "train.lr", "run"]

    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["compare", str(sweep_dir), "--quantized"]) == 0
    out = capsys.readouterr().out
    check_fits(out, 80)
    headers, _ = transposed(out)
    assert [flat(h) for h in headers] == [f"point {p}{d}" for p in (1, 3) for d in
                                          ("none", "quantized:fp32", "quantized:ternary-sparse90")]


def test_compare_accepts_a_folder_of_runs_and_mixes_it_with_runs(tmp_path, capsys):
    folder = tmp_path / "study"
    b = write_fake_run(folder / "defense-dpsgd-20250102-000000", defense="dp-sgd", epsilon=2.0)
    a = write_fake_run(folder / "defense-clip-20250102-000000", defense="clip", epsilon="inf")
    (folder / "notes.txt").write_text("x")
    (folder / "unfinished-20250103-000000" / "checkpoints").mkdir(parents=True)
    c = write_fake_run(tmp_path / "other-20250101-000000")
    assert cli.main(["compare", str(folder), str(c), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in data] == [a.name, b.name, c.name]  # name order, then c
    assert [r["defense"] for r in data] == ["clip", "dp-sgd", "none"]
    assert data[0]["epsilon"] == "inf"


@pytest.mark.parametrize("case", ["empty", "files-only", "failed-points-only"])
def test_compare_folder_without_a_run_exits_2(tmp_path, capsys, case):
    folder = tmp_path / case
    folder.mkdir()
    if case == "files-only":
        (folder / "compare.csv").write_text("run\n")
        (folder / "sub").mkdir()
    elif case == "failed-points-only":
        (folder / "compare.json").write_text("[]")
        (folder / "quickstart-20250101-000000" / "checkpoints").mkdir(parents=True)
    rc = cli.main(["compare", str(folder)])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and str(folder) in err
    assert "no finished fedaudit run" in err and "Traceback" not in err


def test_unfinished_run_dir_keeps_its_own_error(tmp_path, capsys):
    run_dir = tmp_path / "quickstart-20250101-000000"
    (run_dir / "checkpoints").mkdir(parents=True)
    assert cli.main(["compare", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "no results.json" in err and str(run_dir) in err


def test_the_insider_upper_bound_has_a_column_of_its_own(tmp_path):
    from fedaudit.compare import compare_rows

    run = write_fake_run(tmp_path / "positions-20250101-120000")
    res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    res["attack_positions"] = [
        {"position": "outsider", "auc": 0.61},
        {"position": "insider", "round": 4, "auc": 0.62,
         "best_round_upper_bound": {"round": 2, "auc": 0.66}},
        {"position": "curious server", "auc": 0.7}]
    (run / "results.json").write_text(json.dumps(res), encoding="utf-8")
    (row,) = compare_rows([run])
    assert (row["insider_best"], row["insider_upper_bound"], row["server_best"]) == \
        (0.62, 0.66, 0.7)
