"""The guide's promises about the command line in a run: a run directory validates and
resumes from another directory, --resume on a finished run changes nothing."""

import subprocess
import sys
from pathlib import Path

from tests.helpers.npz_scenario import write_scenario_file


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "fedaudit.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_run_dir_validates_and_resumes_from_another_directory(tmp_path):
    toml = write_scenario_file(tmp_path / "scratch")
    first = _cli("run", "mine.toml", "--out", str(tmp_path / "runs"), "--no-report",
                 cwd=tmp_path / "scratch")
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    assert run_dir.is_absolute()
    other = tmp_path / "other"
    other.mkdir()
    val = _cli("validate", str(run_dir / "scenario.toml"), cwd=other)
    assert val.returncode == 0, val.stderr

    # a finished run: --resume says so and changes nothing (no Ray, no rewrite)
    results = (run_dir / "results.json").read_bytes()
    log = (run_dir / "run.log").read_bytes()
    again = _cli("run", "--resume", str(run_dir), cwd=other)
    assert again.returncode == 0 and "already finished" in again.stderr
    assert Path(again.stdout.strip()) == run_dir
    assert (run_dir / "results.json").read_bytes() == results
    assert (run_dir / "run.log").read_bytes() == log
    assert not (run_dir / "report.html").exists()

    # interrupted after training (no results.json): resumes from another directory
    (run_dir / "results.json").unlink()
    resumed = _cli("run", "--resume", str(run_dir), "--no-report", cwd=other)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (run_dir / "results.json").is_file()
    assert toml.exists()
