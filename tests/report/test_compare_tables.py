"""``fedaudit compare`` tables at a terminal width: transposed when wide, split into tables
of near equal size, every number whole.  No training: fake finished runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fedaudit import cli

from tests.helpers.fake_runs import QUANTIZERS, write_fake_run
from tests.report.tables import (LABELS, check_fits, check_numbers_whole, flat, parse_tables,
                                 render, transposed)


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


def test_an_attack_s_interval_follows_its_figure_in_every_output(tmp_path, capsys, monkeypatch):
    """A run whose results.json has the 95 % intervals (``auc_ci``): the table shows each
    AUC and TPR with its interval, CSV and JSON carry ``<method>_auc_ci`` after the AUC; a
    run made before the intervals keeps the plain figure (and no interval column)."""
    import json

    from fedaudit.compare import columns, compare_rows, to_csv

    new = write_fake_run(tmp_path / "new-20250101-120000")
    res = json.loads((new / "results.json").read_text())
    res["attacks"]["loss"].update(auc_ci=[0.6, 0.64], tpr_at_1pct_fpr_ci=[0.01, 0.05])
    (new / "results.json").write_text(json.dumps(res))
    old = write_fake_run(tmp_path / "old-20250101-130000")
    rows = compare_rows([new, old])
    cols = columns(rows)
    at = cols.index("loss_auc")
    assert cols[at:at + 4] == ["loss_auc", "loss_auc_ci", "loss_tpr_1pct_fpr",
                               "loss_tpr_1pct_fpr_ci"]
    assert "resmia_auc_ci" not in cols  # no run has that interval
    assert rows[0]["loss_auc_ci"] == [0.6, 0.64] and rows[1]["loss_auc_ci"] is None
    header, first = to_csv(rows).splitlines()[:2]
    assert "loss_auc,loss_auc_ci," in header and '"[0.6, 0.64]"' in first
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["compare", str(new), str(old)]) == 0
    out = capsys.readouterr().out
    check_fits(out, 80)
    check_numbers_whole(out, rows)
    _, fields = transposed(out)
    assert [" ".join(c.split()) for c in fields["LOSS AUC"]] == ["0.621 [0.600, 0.640]",
                                                                  "0.621"]
    assert [" ".join(c.split()) for c in fields["LOSS TPR@1%"]] == ["0.023 [0.010, 0.050]",
                                                                     "0.023"]
    assert not any("_ci" in f or "ci" == f.split()[-1] for f in fields)


def test_a_verdict_follows_its_figure(tmp_path, capsys, monkeypatch):
    """A run whose entries carry verdicts: the AUC's cell ends with the verdict in a word,
    CSV and JSON carry ``<method>_auc_verdict`` after the interval; the position and family
    columns carry theirs; a run made before the verdicts shows the figure alone."""
    import json

    from fedaudit.compare import columns, compare_rows, to_csv

    new = write_fake_run(tmp_path / "new-20250101-120000")
    res = json.loads((new / "results.json").read_text())
    res["attacks"]["loss"].update(auc_ci=[0.6, 0.64], verdict={"auc": "leaks"})
    res["attack_positions"] = [{"position": "curious server", "auc": 0.7,
                                "cell_verdict": {"outcome": "inconclusive"}}]
    (new / "results.json").write_text(json.dumps(res))
    old = write_fake_run(tmp_path / "old-20250101-130000")
    rows = compare_rows([new, old])
    cols = columns(rows)
    at = cols.index("loss_auc")
    assert cols[at:at + 3] == ["loss_auc", "loss_auc_ci", "loss_auc_verdict"]
    assert cols[cols.index("server_best") + 1] == "server_best_verdict"
    assert rows[0]["loss_auc_verdict"] == "leaks" and rows[1]["loss_auc_verdict"] is None
    assert rows[0]["server_best_verdict"] == "inconclusive"
    assert "loss_auc_ci,loss_auc_verdict," in to_csv(rows).splitlines()[0]
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["compare", str(new), str(old)]) == 0
    out = capsys.readouterr().out
    _, fields = transposed(out)
    assert [" ".join(c.split()) for c in fields["LOSS AUC"]] == ["0.621 [0.600, 0.640] leaks",
                                                                  "0.621"]
    assert [" ".join(c.split()) for c in fields["server best AUC"]][0] == "0.700 inconcl"
    assert not any(f.endswith("verdict") for f in fields)
