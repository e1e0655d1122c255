"""Ctrl-C: exit 130 within seconds, one line, no traceback, no Ray process left, resumable."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedaudit.console.interrupt import process_stats


SMALL = ["federation.num_clients=3", "federation.rounds=3", "audit.quantization.quantizers=['fp32', 'binary']",
         "attack.methods=['loss']"]


def _start(out: Path, *extra: str) -> subprocess.Popen:
    sets = [a for s in SMALL for a in ("--set", s)]
    # a new session, like a terminal's foreground job: SIGINT goes to the whole group,
    # Ray's processes included, as Ctrl-C does
    return subprocess.Popen([sys.executable, "-m", "fedaudit.cli", "run", "quickstart",
                             "--out", str(out), "--no-report", *sets, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _session_processes(sid: int) -> list[int]:
    """Live processes of session ``sid`` (what a Ctrl-C'd run may leave behind)."""
    return [pid for pid, fields in process_stats() if int(fields[3]) == sid and fields[0] != "Z"]


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "the run never reached the point to interrupt"
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen) -> tuple[float, str, str]:
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return time.monotonic() - t0, out, err


def _run_dir(root: Path) -> Path:
    dirs = [p for p in root.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc (Linux)")
@pytest.mark.parametrize("when", ["ray-start", "training"])
def test_ctrl_c_exits_130_quickly_cleanly_and_resumes(tmp_path, when):
    out = tmp_path / "runs"
    proc = _start(out)
    if when == "ray-start":  # scenario.toml is written just before Ray starts
        _wait_for(lambda: list(out.glob("*/scenario.toml")), proc)
    else:
        _wait_for(lambda: any(len(p.read_text().splitlines()) >= 1
                              for p in out.glob("*/rounds.jsonl")), proc)
    seconds, stdout, stderr = _interrupt(proc)
    assert proc.returncode == 130, stderr[-3000:]
    assert seconds < 10, seconds
    assert "Traceback" not in stderr, stderr[-3000:]
    run_dir = _run_dir(out)
    line = [ln for ln in stderr.splitlines() if ln.startswith("fedaudit: interrupted")]
    assert len(line) == 1, stderr[-3000:]
    assert f"fedaudit run --resume {run_dir.resolve()}" in line[0]
    if when == "ray-start":
        assert "keeps 0 finished round(s)" in line[0]
    time.sleep(0.5)  # SIGKILLed children are reaped by init
    assert _session_processes(proc.pid) == [], "processes of the interrupted run are left"
    assert not (run_dir / "results.json").exists()

    resumed = subprocess.run([sys.executable, "-m", "fedaudit.cli", "run", "--resume",
                              str(run_dir), "--no-report"], capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    res = json.loads((run_dir / "results.json").read_text())
    assert [r["round"] for r in res["rounds"]] == [1, 2, 3]
