"""report.html and ``fedaudit sweep`` without a run: a bad run directory, the grid's values,
the low-FPR cells (the report, compare and sweep of real runs:
tests/e2e/test_report_runs.py)."""

from __future__ import annotations

import pytest

from fedaudit import cli
from fedaudit.config import ScenarioError


@pytest.mark.parametrize("case", ["missing", "empty", "corrupt", "file"])
def test_report_bad_run_dir_exits_2_with_one_line(tmp_path, capsys, case):
    target = tmp_path / case
    if case == "empty":
        target.mkdir()
    elif case == "corrupt":
        target.mkdir()
        (target / "results.json").write_text('{"model": {')
    elif case == "file":
        target.write_text("x")
    rc = cli.main(["report", str(target)])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and str(target) in err
    assert "Traceback" not in err
    assert not (tmp_path / case / "report.html").exists() if target.is_dir() else True


# ---- sweep -------------------------------------------------------------------------------

def test_split_grid_values():
    from fedaudit.sweep import parse_grid, split_values

    assert split_values("0.05,0.1") == ["0.05", "0.1"]
    assert split_values("['fp32','int4'],['binary']") == ["['fp32','int4']", "['binary']"]
    assert split_values('"a,b", c') == ['"a,b"', "c"]
    assert parse_grid("data.partitioner=iid,dirichlet").values == ("iid", "dirichlet")
    for bad in ("train.lr", "train.lr=0.1,", "train.lr=[1,2", "train.lr=0.1,0.1"):
        with pytest.raises(ScenarioError):
            parse_grid(bad)


@pytest.mark.parametrize("grid", ["train.lr=0.05,-1", "train.nope=1,2", "train.lr=0.1,[1",
                                  "data.partitioner=iid,sideways"])
def test_sweep_bad_grid_value_exits_2_and_writes_nothing(tmp_path, capsys, grid):
    out = tmp_path / "sweeps"
    rc = cli.main(["sweep", "quickstart", "--grid", "federation.rounds=1,2", "--grid", grid,
                   "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_low_fpr_cells_say_at_fpr_zero_where_the_nonmembers_cannot_resolve_it():
    from fedaudit.report.format import tpr_at_fpr

    assert tpr_at_fpr(0.25, 1 / 1000, 0.01) == "0.250"  # 1/1000 <= 1%: a real TPR@1%
    cell = tpr_at_fpr(0.25, 1 / 180, 0.001)  # 1/180 > 0.1%: only FPR = 0 qualifies
    assert "0.250 at FPR = 0" in cell and 'class="lowres"' in cell
    assert "at FPR" not in tpr_at_fpr(None, 1 / 180, 0.001)  # nothing to qualify
