"""The labs' notebooks executed with nbclient, and the ``fedaudit`` command in a
subprocess, for the labs' unit tests and their end-to-end runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

LABS = ROOT / "labs"
FEDAUDIT = [sys.executable, "-m", "fedaudit.cli"]


def fedaudit_cli(*args, cwd=None):
    """``fedaudit ARGS`` in a subprocess (telemetry off): the finished process."""
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0")
    return subprocess.run([*FEDAUDIT, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def execute_notebook(path: Path, cwd: Path):
    """The notebook at ``path`` executed in ``cwd``: (the notebook with its outputs, the
    CellExecutionError that stopped it or None)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        return nb, exc
    return nb, None


def error_cell(nb):
    """(index, output) of the first cell whose output is an error; (None, None) if none."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return i, out
    return None, None
