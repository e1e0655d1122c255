"""Runs started as a user starts them: ``fedaudit run`` in a subprocess."""

import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT


def run_cli(scenario: str, out: Path, sets: list[str],
            extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, Path]:
    """``fedaudit run scenarios/SCENARIO.toml --out OUT [EXTRA] --set ...`` in a subprocess;
    the finished process (exit 0 asserted) and its run directory."""
    args = [sys.executable, "-m", "fedaudit.cli", "run",
            str(ROOT / "scenarios" / f"{scenario}.toml"), "--out", str(out), *extra]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, Path(proc.stdout.strip().splitlines()[-1])
