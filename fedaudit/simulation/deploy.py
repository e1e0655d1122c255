"""``fedaudit deploy``: a scenario through Flower's deployment path (``flwr run``), checked.

``flwr run . --stream`` (Flower 1.42) submits the ServerApp to a SuperLink -- locally a
managed one it starts in the background -- and exits 0 whether the run finished or failed;
its simulation federation has 2 SuperNodes unless told otherwise.  This wrapper validates
the scenario first (exit 2 on bad input, nothing written), passes
``--federation-config num-supernodes=N`` for the scenario's clients and the run config as a
TOML file (so ``--set`` values need no shell quoting), streams the log, then asks the
SuperLink for the run's final status (``flwr ls --run-id``) and exits 1 with Flower's
reason when the run did not complete.  The run directory it prints is absolute.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from fedaudit.errors import ScenarioError

#: set for the managed SuperLink at its start: without it Flower 1.42 runs ``uv sync`` for
#: the app and would download torch
FLOWER_ENV = {"FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1", "FLWR_TELEMETRY_ENABLED": "0"}


@dataclass(frozen=True)
class DeployResult:
    run_id: str | None
    status: str  # Flower's, e.g. "finished:completed", or "unknown"
    details: str
    run_dir: Path | None
    returncode: int  # flwr run's own


def project_root() -> Path:
    """The Flower App folder: the checkout holding this package's pyproject.toml."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or "[tool.flwr.app]" not in pyproject.read_text(encoding="utf-8"):
        raise ScenarioError(f"deploy: no Flower App found at {root} (fedaudit is not installed "
                            "from a checkout); pass --app DIR, the folder holding fedaudit's "
                            "pyproject.toml")
    return root


def run_config(scenario: str, overrides: list[str], out: Path) -> dict[str, str]:
    """The ServerApp's run config (``[tool.flwr.app.config]`` keys)."""
    path = Path(scenario)
    if path.suffix == ".toml" or path.exists():
        scenario = str(path.resolve())  # the ServerApp runs in the SuperLink's folder
    return {"scenario": scenario, "set": ";".join(overrides), "out": str(out.resolve())}


def _flwr() -> str:
    exe = Path(sys.executable).with_name("flwr")
    return str(exe) if exe.exists() else "flwr"


def run_status(run_id: str, app: Path, env: dict[str, str]) -> tuple[str, str]:
    """Flower's final status of a run and its details (``flwr ls --run-id``)."""
    proc = subprocess.run([_flwr(), "ls", "--run-id", run_id, "--format", "json"],
                          capture_output=True, text=True, cwd=app, env=env, timeout=120)
    try:
        runs = json.loads(proc.stdout)["runs"]
        return str(runs[0]["status"]), str(runs[0].get("status-details", ""))
    except (ValueError, KeyError, IndexError):
        return "unknown", (proc.stdout + proc.stderr).strip()[-500:]


def deploy(scenario: str, overrides: list[str], num_supernodes: int, out: Path,
           app: Path | None = None, echo=None) -> DeployResult:
    """Run through ``flwr run APP --stream``; stream its output to ``echo`` (default
    stderr) and return the run's final status."""
    app = Path(app).resolve() if app is not None else project_root()
    echo = echo or (lambda line: print(line, end="", file=sys.stderr, flush=True))
    # flwr starts `flower-superlink` by name: find it next to this interpreter even when
    # the virtual environment is not activated
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, **FLOWER_ENV,
           "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")])}
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", suffix=".toml", delete=False) as fh:
        tomli_w.dump(run_config(scenario, overrides, out), fh)
        cfg_path = fh.name
    try:
        proc = subprocess.Popen(
            [_flwr(), "run", str(app), "--stream", "--run-config", cfg_path,
             "--federation-config", f"num-supernodes={num_supernodes}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=app, env=env)
        run_id, run_dir = None, None
        out_prefix = str(out.resolve())
        assert proc.stdout is not None
        for line in proc.stdout:
            echo(line)
            m = re.search(r"Successfully started run (\d+)", line)
            if m:
                run_id = m.group(1)
            text = line.strip()
            if text.startswith(out_prefix + os.sep) and Path(text).is_dir():
                run_dir = Path(text)
        proc.wait()
    finally:
        os.unlink(cfg_path)
    if run_id is None:
        return DeployResult(None, "not started", "flwr run did not start a run",
                            None, proc.returncode)
    status, details = run_status(run_id, app, env)
    return DeployResult(run_id, status, details, run_dir, proc.returncode)
