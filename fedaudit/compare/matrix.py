"""``fedaudit compare --matrix``: the threat-model matrix of several runs side by side (one
column per run, a row per attacker position and attack family;
:mod:`fedaudit.rundir.threat_matrix`), rebuilt from each run's results.json so that runs
made before the matrix existed have their column too."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable

from fedaudit.rundir.threat_matrix import MEASURED, families, threat_matrix
from fedaudit.compare.cells import defense_of
from fedaudit.rundir.reading import load_run

__all__ = ["matrices", "matrix_json", "matrix_table"]


def _label(results: dict[str, Any], prefix: dict[str, Any], path: Path) -> str:
    fed = (results.get("scenario") or {}).get("federation") or {}
    grid = " ".join(f"{k}={v}" for k, v in prefix.items() if k != "point")
    return grid or f"{defense_of(results)}, {fed.get('aggregation', 'plain')} ({path.name})"


def matrices(run_dirs: Iterable[str | Path]) -> list[tuple[str, dict]]:
    """(column label, matrix) per run, in the order :func:`fedaudit.compare.expand_run_dir`
    gives them (a sweep folder: its points, labelled by their grid values)."""
    from fedaudit.compare import expand_run_dir

    targets = [t for d in run_dirs for t in expand_run_dir(d)]
    runs = [(load_run(d), prefix) for d, prefix in targets]  # all checked before any output
    return [(_label(run.results, prefix, run.path), threat_matrix(run.results))
            for run, prefix in runs]


def matrix_json(cols: list[tuple[str, dict]]) -> str:
    return json.dumps([{"run": label, "matrix": {pos: {f: asdict(c) for f, c in row.items()}
                                                 for pos, row in m.items()}}
                       for label, m in cols], indent=1) + "\n"


#: a verdict's colour in the console (the matrix report's: red leaks, green no leak beyond
#: delta, yellow inconclusive)
COLOURS = {"leaks": "red", "leaks (inverted score)": "red", "no leak beyond delta": "green",
           "inconclusive": "yellow"}


def _measured(c: Any) -> str:
    """A measured cell: its text, then its verdict's summary in the verdict's colour."""
    from rich.markup import escape

    summary = (c.detail or {}).get("summary") if isinstance(c.detail, dict) else c.verdict
    colour = COLOURS.get(c.verdict or "")
    line = f"\n[{colour}]{escape(summary)}[/{colour}]" if summary and colour else \
        (f"\n{escape(summary)}" if summary else "")
    return escape(c.text) + line


def matrix_table(cols: list[tuple[str, dict]], title: str = "threat-model matrix"):
    """A rich table: a row per (position, family), a column per run; a cell is the figure
    or why there is none (dim)."""
    from rich.table import Table

    t = Table(title=title, show_lines=True)
    t.add_column("position")
    t.add_column("family")
    for label, _ in cols:
        t.add_column(label, overflow="fold")
    positions = list(cols[0][1]) if cols else []
    fams = families()
    for pos in positions:
        for fam in fams:
            cells = []
            for _, m in cols:
                c = m[pos].get(fam)
                cells.append("[dim]not measured[/dim]" if c is None else _measured(c)
                             if c.status == MEASURED else f"[dim]{c.status}[/dim]")
            t.add_row(pos if fam == fams[0] else "", fam, *cells)
    return t


def print_matrices(run_dirs: Iterable[str | Path], *, as_json: bool = False) -> None:
    """``fedaudit compare --matrix [--json]``: the runs' matrices side by side, as a table
    (wide enough for every column) or as JSON on stdout."""
    import sys

    cols = matrices(run_dirs)
    if as_json:
        sys.stdout.write(matrix_json(cols))
        return
    from rich.console import Console

    Console(width=max(100, 30 + 34 * len(cols))).print(matrix_table(cols))
