"""Flower's deployment path: the user guide's ``flwr run .`` command as printed, and
``fedaudit deploy`` (checked exit status).  Every process these tests start (the managed
local SuperLink, its SuperExec, the simulation and Ray under it) is killed afterwards."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedaudit.console.interrupt import descendants

from tests.helpers.docs import flwr_command_run_by_the_suite
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="cleanup reads /proc")

FLOWER_DAEMONS = ("flower-superlink", "flower-superexec")


def _daemons() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if any(d in cmd for d in FLOWER_DAEMONS):
                pids.add(int(entry.name))
    return pids


@pytest.fixture()
def flower_home(tmp_path, monkeypatch):
    """An isolated FLWR_HOME; afterwards kill the SuperLink the test started and all
    processes below it."""
    before = _daemons()
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    yield tmp_path / "flwr-home"
    started = _daemons() - before
    victims = [p for pid in started for p in [pid, *descendants(pid)]]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    assert not (_daemons() - before), "a Flower daemon survived the cleanup"


def test_guide_flwr_run_command_as_printed(flower_home):
    cmd = flwr_command_run_by_the_suite()
    assert "num-supernodes=10" in cmd  # quickstart has 10 clients
    # as the guide says: in the checkout, with the virtual environment active
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                  os.environ.get("PATH", "")])}
    proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    dirs = [Path(m) for m in re.findall(r"^(/\S+/quickstart-[0-9-]+)$", proc.stdout, re.M)]
    assert dirs, proc.stdout[-3000:]
    run_dir = dirs[-1]
    try:
        assert run_dir.is_absolute() and (run_dir / "report.html").is_file()
        res = json.loads((run_dir / "results.json").read_text())
        assert [r["round"] for r in res["rounds"]] == [1]
        assert len(res["clients"]) == 10
    finally:
        if run_dir.parent == ROOT / "runs":
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)


def _deploy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fedaudit.cli", "deploy", *args],
                          capture_output=True, text=True, timeout=600)


def test_deploy_checks_input_runs_and_reports_flower_failures(flower_home, tmp_path):
    out = tmp_path / "runs"
    bad = _deploy("quickstart", "--set", "federation.rounds=0", "--out", str(out))
    assert bad.returncode == 2 and "federation.rounds" in bad.stderr
    assert not out.exists()  # nothing written, no SuperLink started

    ok = _deploy("quickstart", "--set", "federation.num_clients=2", "--set",
                 "federation.rounds=1", "--set", "attack.methods=['loss']", "--set",
                 "audit.quantization.quantizers=['fp32', 'int4']", "--out", str(out))
    assert ok.returncode == 0, ok.stderr[-3000:]
    run_dir = Path(ok.stdout.strip().splitlines()[-1])
    assert run_dir.is_absolute() and run_dir.parent == out.resolve()
    assert (run_dir / "report.html").is_file()
    res = json.loads((run_dir / "results.json").read_text())
    assert len(res["clients"]) == 2 and list(res["attacks"]) == ["loss"]

    # a ServerApp failure inside Flower (here: a scenario the ServerApp cannot load,
    # which `fedaudit deploy` itself would have refused): exit 1 with Flower's reason
    from fedaudit.simulation.deploy import deploy

    lines: list[str] = []
    failed = deploy("no-such-scenario", [], 2, out, echo=lines.append)
    assert failed.status == "finished:failed", (failed, "".join(lines)[-3000:])
    assert "no-such-scenario" in failed.details
    assert sorted(p.name for p in out.iterdir()) == [run_dir.name]  # no partial run dir
