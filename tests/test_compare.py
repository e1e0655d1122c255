"""``fedaudit compare`` tables at a terminal width, CSV / JSON, and folders of runs as arguments.

No training here: the run directories are fake finished runs (a results.json with the keys
``fedaudit compare`` reads), so every test takes milliseconds.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fedaudit import cli

QUANTIZERS = ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90",
              "binary"]
METHODS = ["resmia", "loss", "confidence", "entropy", "mentropy"]
NUMBER = re.compile(r"^(–|∞|−∞|nan|\d+\.\d{3}|\d+(\.\d+)?(e[-+]\d+)?)$")
LABELS = ["Res-MIA", "LOSS", "confidence", "entropy", "m-entropy"]


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


def render(rows: list[dict], width: int, title: str = "fedaudit compare") -> str:
    """What ``layout_tables`` prints at ``width``, uncropped (a line too long stays long)."""
    from rich.console import Console

    from fedaudit.compare import layout_tables

    console = Console(width=width, record=True, file=io.StringIO())
    for t in layout_tables(rows, title, width):
        console.print(t, crop=False)
    return console.export_text()


def parse_tables(text: str) -> list[dict]:
    """Every table in rendered output: ``{"header": [cell], "body": [[cell]]}``, a cell's
    lines joined by newlines (a body row per line: a folded name continues on the next)."""
    tables, cur, part = [], None, None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("┏"):
            bounds = [i for i, ch in enumerate(s) if ch in "┏┳┓"]
            cur, part = {"header": [""] * (len(bounds) - 1), "body": []}, "header"
            tables.append(cur)
        elif s.startswith("┡"):
            part = "body"
        elif s.startswith("└"):
            cur = part = None
        elif part == "header":
            for j, (a, b) in enumerate(zip(bounds, bounds[1:])):
                piece = s[a + 1:b].strip()
                cur["header"][j] = "\n".join(x for x in (cur["header"][j], piece) if x)
        elif part == "body":
            cur["body"].append([s[a + 1:b].strip() for a, b in zip(bounds, bounds[1:])])
    return tables


def transposed(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """The run column headers and ``field name -> cells`` (in run order) of transposed
    tables, their parts put together; the field names must not wrap."""
    headers, fields = [], {}
    for t in parse_tables(text):
        headers += t["header"][1:]
        label = None
        for row in t["body"]:
            if row[0]:
                label = row[0]
                fields.setdefault(label, [])
                start = len(fields[label])
                fields[label] += row[1:]
            else:  # a continuation line of the row above
                for j, piece in enumerate(row[1:]):
                    if piece:
                        fields[label][start + j] += "\n" + piece
    return headers, fields


def flat(cell: str) -> str:
    """A folded cell (name broken anywhere) back in one piece."""
    return cell.replace("\n", "")


def check_fits(text: str, width: int) -> None:
    """Output within ``width`` cells, nothing cut, every header cell filled, numbers whole."""
    lines = text.splitlines()
    assert lines, "no output"
    too_long = [ln for ln in lines if len(ln) > width]
    assert not too_long, f"{len(too_long)} lines over {width}: {too_long[0]!r}"
    assert "…" not in text and "..." not in text
    tables = parse_tables(text)
    assert tables, "no table"
    for t in tables:
        assert all(t["header"]), f"blank header cell: {t['header']}"
        for row in t["body"]:
            for cell in row:
                if re.fullmatch(r"[\d.,∞–−]+", cell):
                    assert NUMBER.match(cell), f"number shortened: {cell!r}"


def numbers(rows: list[dict]) -> Counter:
    """Every number cell the rows should show, as many times as it should appear."""
    from fedaudit.compare import _cell

    return Counter(_cell(k, v) for r in rows for k, v in r.items()
                   if v is not None and k not in ("point", "train.lr")
                   and (k.endswith(("_auc", "_fpr", "_best")) or k.startswith(("rqn", "eps"))
                        or k == "test_accuracy"))


def check_numbers_whole(text: str, rows: list[dict]) -> None:
    """Each number of ``rows`` is a whole cell of the output (none folded or shortened)."""
    cells = Counter(c for t in parse_tables(text) for row in t["body"] for c in row)
    missing = numbers(rows) - cells
    assert not missing, f"numbers not shown whole: {dict(missing)}"


# ---- CSV / JSON: byte for byte what the layout planner's version wrote -----------------------

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


# ---- the table at a width ------------------------------------------------------------------

def test_wide_rows_at_80_columns_are_transposed_with_every_number(two_runs, capsys,
                                                                  monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["compare", *map(str, two_runs)]) == 0
    out = capsys.readouterr().out
    check_fits(out, 80)
    assert len(parse_tables(out)) == 1
    headers, fields = transposed(out)
    assert [flat(h) for h in headers] == [r.name for r in two_runs]  # folded by rich, whole
    assert "scenario quickstart-defended" in out.splitlines()[1]  # the same in both: title
    expected = {"defense": ["none", "dp-sgd"], "DP epsilon": ["–", "3.21"],
                "test acc": ["0.912"] * 2, "mean r_Qn": ["4.5"] * 2}
    for i, label in enumerate(LABELS):
        expected[f"{label} AUC"] = [f"{0.61 + 0.011 * i:.3f}"] * 2
        expected[f"{label} TPR@1%"] = [f"{0.02 + 0.003 * i:.3f}"] * 2
    assert fields == expected
    assert "transposed to fit 80 columns; --csv or --json give one row per run" in out


def test_narrow_rows_at_80_columns_give_the_normal_table(two_runs):
    from fedaudit.compare import compare_rows

    keep = ("run", "scenario", "defense", "epsilon", "test_accuracy", "loss_auc")
    rows = [{k: r[k] for k in keep} for r in compare_rows(two_runs)]
    out = render(rows, 80)
    check_fits(out, 80)
    (table,) = parse_tables(out)
    assert [" ".join(h.split()) for h in table["header"]] == \
        ["run", "defense", "DP epsilon", "test acc", "LOSS AUC"]
    assert table["body"] == [[two_runs[0].name, "none", "–", "0.912", "0.621"],
                             [two_runs[1].name, "dp-sgd", "3.21", "0.912", "0.621"]]
    assert "transposed" not in out


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("width", [50, 60, 80, 100, 132, 200])
def test_tables_fit_a_width_with_every_number_whole(two_runs, width, quantized):
    from fedaudit.compare import compare_rows

    rows = compare_rows(two_runs, quantized=quantized)
    out = render(rows, width)
    check_fits(out, width)
    check_numbers_whole(out, rows)
    if len(parse_tables(out)) > 1 or "transposed" in out:
        headers, fields = transposed(out)
        want = [r["run"] + (r["defense"] if quantized else "") for r in rows]
        assert [flat(h) for h in headers] == want  # every release once, in order
        assert set(map(len, fields.values())) == {len(rows)}


def test_many_runs_are_split_into_transposed_tables_of_near_equal_size(tmp_path):
    from fedaudit.compare import compare_rows

    runs = [write_fake_run(tmp_path / f"run{i:02d}-20250101-120000", defense="dp-sgd",
                           epsilon=round(0.5 + i, 2)) for i in range(10)]
    rows = compare_rows(runs)
    out = render(rows, 80)
    check_fits(out, 80)
    check_numbers_whole(out, rows)
    tables = parse_tables(out)
    sizes = [len(t["header"]) - 1 for t in tables]
    assert len(tables) > 1 and sum(sizes) == 10 and max(sizes) - min(sizes) <= 1
    assert [f"fedaudit compare ({i}/{len(tables)})" in out for i in range(1, len(tables) + 1)]
    headers, fields = transposed(out)
    assert [flat(h) for h in headers] == [r.name for r in runs]
    assert fields["DP epsilon"] == [f"{0.5 + i:g}" for i in range(10)]
    assert out.count("transposed to fit 80 columns") == 1  # under the last table


def test_sweep_rows_with_a_failure_at_80_columns(two_runs):
    from fedaudit.compare import align, compare_rows

    rows = [{"point": i, "train.lr": lr, "audit.quantization.quantizers": ["fp32", "binary"],
             **r} for i, (lr, r) in enumerate(zip((0.05, 0.1), compare_rows(two_runs)), 1)]
    error = ("RuntimeError: client actor died " * 6).strip()
    rows.append({"point": 3, "train.lr": 0.2, "audit.quantization.quantizers": ["fp32"],
                 "run": "quickstart-defended-20250101-140000", "scenario": "quickstart-defended",
                 "defense": "none", "release": "global", "status": "failed", "error": error})
    rows = align(rows)
    out = render(rows, 80, "sweep x")
    check_fits(out, 80)
    check_numbers_whole(out, rows)
    headers, fields = transposed(out)
    assert headers == ["point 1", "point 2", "point 3"]
    assert [flat(c) for c in fields["run"]] == [r["run"] for r in rows]
    assert fields["train.lr"] == ["0.050", "0.100", "0.200"]
    assert fields["status"] == ["ok", "ok", "failed"]
    assert " ".join(fields["error"][2].split()) == error  # wrapped at spaces, whole


def test_one_run_quantized_names_each_release_by_its_defense(two_runs):
    from fedaudit.compare import compare_rows

    rows = compare_rows(two_runs[1:], quantized=True)
    out = render(rows, 80)
    check_fits(out, 80)
    check_numbers_whole(out, rows)
    headers, fields = transposed(out)
    assert [flat(h) for h in headers] == ["dp-sgd"] + [f"dp-sgd+quantized:{q}"
                                                       for q in QUANTIZERS]
    assert f"run {two_runs[1].name}, scenario quickstart-defended" in out  # in the title
    assert "run" not in fields and "defense" not in fields
    assert fields["quant r_Qn"][-1] == "∞"


def test_below_one_run_per_table_rich_squeezes_it(two_runs):
    from fedaudit.compare import compare_rows

    rows = compare_rows(two_runs)
    out = render(rows, 34)  # field names (17) and one run column (12) need 36
    assert max(map(len, out.splitlines())) <= 34
    tables = parse_tables(out)
    assert [len(t["header"]) for t in tables] == [2, 2]  # a table per run, squeezed


def test_wide_table_unchanged_in_a_pipe_without_columns(two_runs, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["compare", *map(str, two_runs), "--quantized"]) == 0
    out = capsys.readouterr().out
    (table,) = parse_tables(out)  # one table, a row per release, as wide as it needs
    assert len(table["body"]) == 2 + 2 * len(QUANTIZERS)
    assert max(map(len, out.splitlines())) > 80
    assert [row[1] for row in table["body"]][-1] == "dp-sgd+quantized:binary"
    check_fits(out, 10_000)


def test_columns_honoured_by_the_cli_process(two_runs):
    env = {**os.environ, "COLUMNS": "80", "FLWR_TELEMETRY_ENABLED": "0"}
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "compare", *map(str, two_runs),
                           "--quantized"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_fits(proc.stdout, 80)
    assert "transposed to fit 80 columns" in proc.stdout


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
