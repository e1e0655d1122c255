"""``fedaudit compare`` tables at a terminal width, and folders of runs as arguments.

No training here: the run directories are fake finished runs (a results.json with the keys
``fedaudit compare`` reads), so every test takes milliseconds.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedaudit import cli

QUANTIZERS = ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90",
              "binary"]
METHODS = ["resmia", "loss", "confidence", "entropy", "mentropy"]
NUMBER = re.compile(r"^(–|∞|−∞|nan|\d+\.\d{3}|\d+(\.\d+)?(e[-+]\d+)?)$")


def _attacks(base: float) -> dict:
    return {m: {"auc": round(base + 0.011 * i, 4), "tpr_at_1pct_fpr": round(0.02 + 0.003 * i, 4),
                "fpr_at_80pct_tpr": 0.5} for i, m in enumerate(METHODS)}


def write_fake_run(run_dir: Path, scenario: str = "quickstart-defended", *,
                   defense: str | None = None, epsilon: float | str | None = None,
                   quantizers: list[str] = QUANTIZERS, scen: dict | None = None) -> Path:
    """A finished run directory as far as ``compare`` is concerned."""
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    scen = dict(scen or {"scenario": {"name": scenario}})
    if defense:
        scen["defense"] = {"kind": defense}
    res = {"scenario": scen, "model": {"test_accuracy": 0.9123, "test_loss": 0.31},
           "rounds": [{"round": 1}], "attacks": _attacks(0.61),
           "quantization": [{"quantizer": q, "bits": 4, "test_accuracy": 0.9 - 0.01 * i,
                             "rqn": "inf" if q == "binary" else 1.5 + i,
                             "attacks": _attacks(0.55 - 0.004 * i)}
                            for i, q in enumerate(quantizers)]}
    if defense:
        res["defense"] = {"kind": defense, "epsilon": epsilon}
    (run_dir / "results.json").write_text(json.dumps(res, default=str), encoding="utf-8")
    return run_dir


@pytest.fixture()
def two_runs(tmp_path) -> list[Path]:
    return [write_fake_run(tmp_path / "quickstart-defended-20250101-120000"),
            write_fake_run(tmp_path / "quickstart-defended-20250101-130000", defense="dp-sgd",
                           epsilon=3.21)]


def _tables(text: str) -> list[list[str]]:
    """The header lines (between ┏ and ┡) of every table in rendered output."""
    out, cur = [], None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("┏"):
            cur = []
        elif s.startswith("┡") and cur is not None:
            out.append(cur)
            cur = None
        elif cur is not None:
            cur.append(s)
    return out


def _body_cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")]
            for line in text.splitlines() if line.strip().startswith("│")]


def check_fits(text: str, width: int, names: list[str]) -> None:
    """No line wider than ``width``, nothing cut, every header cell filled, names whole."""
    lines = text.splitlines()
    assert lines, "no output"
    too_long = [ln for ln in lines if len(ln) > width]
    assert not too_long, f"{len(too_long)} lines over {width}: {too_long[0]!r}"
    assert "…" not in text and "..." not in text
    for name in names:
        assert name in text, name
    headers = _tables(text)
    assert headers, "no table"
    for head in headers:
        bounds = [m.start() for m in re.finditer("┃", head[0])]
        assert all([m.start() for m in re.finditer("┃", h)] == bounds for h in head)
        for a, b in zip(bounds, bounds[1:]):
            assert b - a >= 4, f"a column of width {b - a - 3}: {head}"
            cell = " ".join(h[a + 1:b].strip() for h in head).strip()
            assert cell, f"blank header cell at {a}: {head}"
    for row in _body_cells(text):
        for cell in row:
            if re.fullmatch(r"[\d.,∞–−]+", cell):
                assert NUMBER.match(cell), f"number shortened: {cell!r}"


# ---- width ---------------------------------------------------------------------------------

def test_compare_quantized_cli_fits_80_columns(two_runs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc = cli.main(["compare", *map(str, two_runs), "--quantized"])
    out = capsys.readouterr().out
    assert rc == 0
    names = [f"quantized:{q}" for q in QUANTIZERS] + [f"dp-sgd+quantized:{q}" for q in QUANTIZERS]
    check_fits(out, 80, names + [r.name for r in two_runs])
    for label in ("Res-MIA", "LOSS", "confidence", "entropy", "m-entropy", "TPR@1%", "mean",
                  "quant", "r_Qn", "3.21", "∞"):
        assert label in out, label
    assert "--csv or --json" in out.splitlines()[-1]


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("width", [60, 80, 100, 132])
def test_layout_tables_fit_a_console_width(two_runs, width, quantized):
    from rich.console import Console

    from fedaudit.compare import compare_rows, layout_tables

    rows = compare_rows(two_runs, quantized=quantized)
    console = Console(width=width, record=True, file=io.StringIO())
    for t in layout_tables(rows, "fedaudit compare", width):
        console.print(t)
    text = console.export_text()
    names = ([f"quantized:{q}" for q in QUANTIZERS] if quantized else ["none", "dp-sgd"])
    check_fits(text, width, names)
    values = {f"{v:.3f}" for r in rows for k, v in r.items() if k.endswith("_auc")}
    assert values <= {c for row in _body_cells(text) for c in row}  # every AUC, unshortened


def test_sweep_rows_with_a_failure_fit_80_columns(two_runs):
    from rich.console import Console

    from fedaudit.compare import align, compare_rows, layout_tables

    rows = [{"point": i, "train.lr": lr, "audit.quantization.quantizers": ["fp32", "binary"],
             **r} for i, (lr, r) in enumerate(zip((0.05, 0.1), compare_rows(two_runs)), 1)]
    rows.append({"point": 3, "train.lr": 0.2, "audit.quantization.quantizers": ["fp32"],
                 "run": "quickstart-defended-20250101-140000", "scenario": "quickstart-defended",
                 "defense": "none", "release": "global", "status": "failed",
                 "error": "RuntimeError: client actor died " * 6})
    rows = align(rows)
    console = Console(width=80, record=True, file=io.StringIO())
    for t in layout_tables(rows, "sweep x", 80):
        console.print(t)
    text = console.export_text()
    check_fits(text, 80, ["failed", "0.050", "0.100", "0.200", "dp-sgd"])
    legend = [ln for ln in text.splitlines() if ln.startswith("point ")]
    assert legend[0] == f"point 1: run {rows[0]['run']}"
    assert legend[2].startswith("point 3: run quickstart-defended-20250101-140000, error "
                                "RuntimeError: client")
    assert text.count("client actor died") >= 3  # the whole error, folded


def test_wide_table_unchanged_in_a_pipe_without_columns(two_runs, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["compare", *map(str, two_runs), "--quantized"]) == 0
    out = capsys.readouterr().out
    assert len(_tables(out)) == 1  # one table, as wide as it needs
    assert max(map(len, out.splitlines())) > 80
    check_fits(out, 10_000, [f"dp-sgd+quantized:{q}" for q in QUANTIZERS])


def test_columns_honoured_by_the_cli_process(two_runs):
    env = {**os.environ, "COLUMNS": "80", "FLWR_TELEMETRY_ENABLED": "0"}
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "compare", *map(str, two_runs),
                           "--quantized"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_fits(proc.stdout, 80, [f"quantized:{q}" for q in QUANTIZERS])


def test_fold_breaks_after_separators():
    from fedaudit.compare import _fold

    assert _fold("quickstart-defended-20250101-120000", 20) == \
        "quickstart-defended-\n20250101-120000"
    assert _fold("abcdefghij", 4) == "abcd\nefgh\nij"
    assert _fold("short", 10) == "short"
    assert all(len(x) <= 7 for x in _fold("RuntimeError: client actor died", 7).split("\n"))


# ---- folders -------------------------------------------------------------------------------

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
    check_fits(out, 80, ["quantized:ternary-sparse90", "quantized:fp32"])


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
