"""report.html, ``fedaudit compare`` and ``fedaudit sweep`` on real runs.

Two small runs (module fixtures, through Flower + Ray) feed the report and compare
tests; the sweep end-to-end test runs two more points.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fedaudit import cli
from fedaudit.config import load_scenario


TINY = ["federation.num_clients=3", "federation.rounds=2",
        "audit.quantization.quantizers=['fp32','int4','binary']",
        "attack.targets=['global','quantized','clients','rounds']", "attack.rounds='all'"]
OFF = TINY + ["attack.enabled=false", "audit.quantization.enabled=false",
              "audit.gnq.client=false", "audit.gnq.server=false", "canaries.count=0"]


def _run(overrides: list[str], out: Path) -> Path:
    from fedaudit.simulation.runner import run

    run_dir, _ = run(load_scenario("quickstart", overrides), out)
    return run_dir


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    return _run(TINY, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def off_run(tmp_path_factory) -> Path:
    return _run(OFF, tmp_path_factory.mktemp("off"))


def _copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("checkpoints", "report.html"))
    return dst


def _check_self_contained(text: str) -> None:
    """No remote resource, no script; every embedded image decodes."""
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"""(?:src|href)\s*=\s*["']?//""", text)
    assert "<script" not in text.lower() and "<link" not in text.lower()
    for m in re.finditer(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", text):
        assert m.group(1).startswith(("data:image/png;base64,", "#")), m.group(1)[:60]
    assert "@import" not in text and "url(" not in text
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    for b64 in pngs:
        assert base64.b64decode(b64, validate=True)[:8] == b"\x89PNG\r\n\x1a\n"
    svgs = re.findall(r"<svg\b.*?</svg>", text, flags=re.S)
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
    assert "@media print" in text


def _report(run_dir: Path, capsys) -> str:
    rc = cli.main(["report", str(run_dir)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert Path(out.out.strip()) == run_dir / "report.html"
    assert not list(run_dir.glob(".report.html.*"))  # atomic write left no temp file
    return (run_dir / "report.html").read_text(encoding="utf-8")


# ---- report ----------------------------------------------------------------------------

def test_report_full_run_has_every_section_and_figure(tiny_run, capsys):
    from fedaudit.report import FIGURES, SECTIONS

    text = _report(tiny_run, capsys)
    for sid, *_ in SECTIONS:
        assert f'<section id="{sid}">' in text, sid
    # the planted secrets are text data's (tests/e2e/test_secrets_run.py) and the
    # reconstructions need [reconstruction] (tests/e2e/test_reconstruction_run.py): absent
    # here, said so
    images = [spec for spec in FIGURES if spec.section not in ("secrets", "update-attacks")]
    for spec in images:
        m = re.search(rf'<figure id="fig-{spec.key}"( class="\w+")?>', text)
        assert m and m.group(1) is None, f"{spec.key}: {m and m.group(1)}"
    assert 'class="error"' not in text
    assert text.count('class="absent"') == len(FIGURES) - len(images)
    assert "no [canaries] kind = &#x27;secret&#x27;" in text or "kind = 'secret'" in text
    assert len(re.findall(r'src="data:image/png;base64,', text)) == len(images)
    res = json.loads((tiny_run / "results.json").read_text())
    lowest = res["attacks"]["loss"]["min_fpr_resolution"]  # 1 / distinct non-members
    assert f"Lowest meaningful FPR here: 1/{round(1 / lowest)} = " in text
    assert text.count('<svg class="spark"') == 3  # one label histogram per client
    for needle in ("Res-MIA AUC", "TPR@1%", "binary", "int4", "[federation]",
                   "num_clients = 3", "Canaries"):
        assert needle in text, needle
    _check_self_contained(text)
    assert len(text.encode()) < 2_000_000


def test_report_without_attacks_quantization_gnq(off_run, capsys):
    from fedaudit.report import SECTIONS

    text = _report(off_run, capsys)
    for sid, *_ in SECTIONS:
        assert f'<section id="{sid}">' in text, sid
    for flag in ("attack.enabled = false", "audit.quantization.enabled = false",
                 "audit.gnq.server = false", "audit.gnq.client = false"):
        assert f"Not run in this scenario ({flag})" in text, flag
    assert 'class="error"' not in text
    assert 'id="fig-training"><img' in text  # training curves are still drawn
    _check_self_contained(text)


def test_report_on_minimal_results_and_infinite_rqn(tiny_run, tmp_path):
    from fedaudit.report import write_report

    run = _copy_run(tiny_run, tmp_path / "inf")
    res = json.loads((run / "results.json").read_text())
    res["quantization"][-1]["rqn"] = "inf"
    res["quantization"][-1]["rqn_note"] = "fewer than two distinct candidates"
    (run / "results.json").write_text(json.dumps(res))
    text = write_report(run).read_text()
    assert 'id="fig-quantization"><img' in text and "r_Qn = inf" in text
    assert "∞" in text  # the quantization table

    bare = tmp_path / "bare"  # only results.json with the two always-present keys
    bare.mkdir()
    (bare / "results.json").write_text(json.dumps({"model": res["model"],
                                                   "rounds": res["rounds"]}))
    text = write_report(bare).read_text()
    assert 'class="error"' not in text
    assert 'id="fig-training"><img' in text
    assert "not recorded in this run" in text
    _check_self_contained(text)


# ---- compare -----------------------------------------------------------------------------

def test_compare_rows_two_runs(tiny_run, off_run):
    from fedaudit.compare import compare_rows

    rows = compare_rows([tiny_run, off_run])
    assert [r["run"] for r in rows] == [tiny_run.name, off_run.name]
    assert all(list(r) == list(rows[0]) for r in rows)  # aligned columns
    a, b = rows
    assert a["scenario"] == "quickstart" and a["defense"] == "none"
    assert 0 <= a["test_accuracy"] <= 1
    for m in ("resmia", "loss", "confidence", "entropy", "mentropy"):
        assert 0 <= a[f"{m}_auc"] <= 1 and 0 <= a[f"{m}_tpr_1pct_fpr"] <= 1
        assert b[f"{m}_auc"] is None  # attacks were off
    assert a["rqn_mean"] is not None and b["rqn_mean"] is None

    q = compare_rows([tiny_run, off_run], quantized=True)
    assert len(q) == 2 + 3
    assert [r["defense"] for r in q[1:4]] == ["quantized:fp32", "quantized:int4",
                                              "quantized:binary"]
    assert all(r["resmia_auc"] is not None for r in q[:4])


def test_compare_cli_formats(tiny_run, off_run, capsys):
    assert cli.main(["compare", str(tiny_run), str(off_run), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["run"] for r in rows] == [tiny_run.name, off_run.name]
    assert {"run", "scenario", "defense", "test_accuracy", "resmia_auc",
            "resmia_tpr_1pct_fpr", "rqn_mean"} <= set(rows[0])
    assert float(rows[0]["resmia_auc"]) > 0 and rows[1]["resmia_auc"] == ""

    assert cli.main(["compare", str(tiny_run), "--json", "--quantized"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == 4 and data[3]["release"] == "quantized:binary"

    assert cli.main(["compare", str(tiny_run), str(off_run)]) == 0
    out = capsys.readouterr().out
    assert tiny_run.name in out and off_run.name in out and "Res-MIA" in out

    assert cli.main(["compare", str(tiny_run), str(off_run / "nope")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nope" in err


# ---- sweep -------------------------------------------------------------------------------


def test_sweep_records_a_failed_point_and_goes_on(tiny_run, tmp_path, monkeypatch):
    """The runner is replaced by a stub that copies a finished run or raises."""
    import fedaudit.simulation.runner as runner
    from fedaudit.sweep import plan_sweep, run_points

    def fake_run(scenario, out, progress=None, verbose=False):
        if scenario.train.lr == 0.1:
            (Path(out) / "quickstart-broken").mkdir()
            raise RuntimeError("client actor died")
        dst = _copy_run(tiny_run, Path(out) / f"quickstart-lr{scenario.train.lr}")
        return dst, json.loads((dst / "results.json").read_text())

    monkeypatch.setattr(runner, "run", fake_run)
    points = plan_sweep("quickstart", ["train.lr=0.05,0.1,0.2"], TINY)
    sweep_dir = tmp_path / "sw"
    sweep_dir.mkdir()
    rows = run_points(points, sweep_dir, report=False)
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert rows[1]["run"] == "quickstart-broken" and "client actor died" in rows[1]["error"]
    assert [r["train.lr"] for r in rows] == [0.05, 0.1, 0.2]
    table = list(csv.DictReader(io.StringIO((sweep_dir / "compare.csv").read_text())))
    assert [r["status"] for r in table] == ["ok", "failed", "ok"]
    assert len(json.loads((sweep_dir / "compare.json").read_text())) == 3


def test_sweep_two_points_end_to_end(tmp_path, capsys):
    args = ["sweep", "quickstart", "--grid", "train.lr=0.05,0.1", "--out", str(tmp_path)]
    for s in TINY + ["train.local_epochs=1", "attack.methods=['loss','resmia']",
                     "audit.quantization.quantizers=['fp32','binary']"]:
        args += ["--set", s]
    rc = cli.main(args)
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    sweep_dir = Path(out.out.strip().splitlines()[-1])
    assert sweep_dir.parent == tmp_path and sweep_dir.name.startswith("sweep-quickstart-")
    runs = sorted(p for p in sweep_dir.iterdir() if p.is_dir())
    assert len(runs) == 2
    for r in runs:
        assert (r / "results.json").is_file() and (r / "report.html").is_file()
    rows = list(csv.DictReader(io.StringIO((sweep_dir / "compare.csv").read_text())))
    assert [float(r["train.lr"]) for r in rows] == [0.05, 0.1]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert {r["run"] for r in rows} == {p.name for p in runs}
    assert all(0 <= float(r["resmia_auc"]) <= 1 for r in rows)
    assert len(json.loads((sweep_dir / "compare.json").read_text())) == 2
    assert "[1/2]" in out.err and "[2/2]" in out.err
