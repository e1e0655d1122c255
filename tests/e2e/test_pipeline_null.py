"""The pipeline null end to end (Flower + Ray; issue 57, item 8b): experiments/pipeline_null.py
registers, from outside the package, a data-free label attack, a reconstruction that
returns the prior image and a defense under which the model never trains, and runs
``fedaudit.matrix`` and ``fedaudit.run`` on the digits: every measured cell must read "no
leak beyond delta" or "inconclusive" (the script exits 1 otherwise)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_leaks_where_nothing_can(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "pipeline_null.py"), "--out",
         str(tmp_path), "--defenses", "untrained"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| untrained")
            or line.startswith("| fedaudit run")]
    # every position that can attack is measured, in the matrix and in the run
    assert len(rows) >= 16, proc.stdout
    assert all("| leaks" not in r for r in rows)
    # the prior image gains nothing: shown safe, not merely not shown leaking
    assert any("reconstruction | no leak beyond delta" in r for r in rows)
    assert "0 outside" in proc.stderr
