"""The Python API: run a scenario, load a run, validate, from a script or a notebook.

    import fedaudit

    run = fedaudit.run("quickstart", overrides=["federation.rounds=2"])
    run.results["attacks"]["loss"]["auc"]
    scores = run.scores()          # scores.npz as named arrays (a DataFrame with pandas)
    run.report()                   # writes report.html, returns its path
    m = fedaudit.matrix("reconstruction-digits", defenses=["none", "secagg+"])
    m.data["defenses"][0]["cells"]  # matrix.json: position -> family -> cell

A scenario is a bundled name, a path to a .toml file, or a dict (nested like the TOML, or
with dotted table names).  Plug-ins registered in the calling process are used: attacks and
quantizers run in this process; datasets, models and GNQ kernels are carried to the
simulated clients (:mod:`fedaudit.simulation.plugins`).  Errors in the scenario raise
:class:`fedaudit.errors.ScenarioError` (one line naming the key and what is allowed).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from fedaudit.errors import ScenarioError
from fedaudit.rundir.layout import RESULTS_NAME, SCORES_NAME
from fedaudit.rundir import using_cache
from fedaudit.scenario import Scenario

ScenarioLike = str | os.PathLike | dict | Scenario


def validate(scenario: ScenarioLike, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """The resolved, typed scenario (every default filled in, paths absolute) after every
    check ``fedaudit run`` makes before training: schema, data, partitions, model,
    resources.  A :class:`~fedaudit.scenario.Scenario` given is validated again (with
    ``overrides`` applied)."""
    from fedaudit.config import load_scenario, scenario_from_dict
    from fedaudit.config.preflight import check_scenario

    if isinstance(scenario, Scenario):
        scenario = scenario.sections()
    if isinstance(scenario, dict):
        resolved = scenario_from_dict(scenario, list(overrides))
    else:
        resolved = load_scenario(os.fspath(scenario), list(overrides))
    return check_scenario(resolved)


@dataclass
class Run:
    """A run directory (docs/guide.md section 4, "What a run leaves")."""

    dir: Path
    _results: dict | None = field(default=None, repr=False)

    @property
    def results(self) -> dict:
        """results.json, parsed (infinite values are the string "inf", as written)."""
        if self._results is None:
            path = self.dir / RESULTS_NAME
            if not path.is_file():
                raise ScenarioError(f"{self.dir}: no results.json; not a finished run")
            self._results = json.loads(path.read_text(encoding="utf-8"))
        return self._results

    def scores(self, as_frame: bool | None = None):
        """scores.npz: ``target, method, sample_id, client, member, score`` as a dict of
        arrays, or a pandas DataFrame when pandas is installed (``as_frame=None``) or asked
        for (``as_frame=True``)."""
        import numpy as np

        path = self.dir / SCORES_NAME
        if not path.is_file():
            raise ScenarioError(f"{self.dir}: no scores.npz (the run had attack.enabled = false)")
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in npz.files}
        if as_frame is False:
            return arrays
        try:
            import pandas as pd
        except ImportError:
            if as_frame:
                raise
            return arrays
        return pd.DataFrame(arrays)

    def report(self) -> Path:
        """Write (or rewrite) report.html; return its path."""
        from fedaudit.report import write_report

        return Path(write_report(self.dir))


def load_run(run_dir: str | os.PathLike) -> Run:
    """A finished run directory (its results.json is read on first use)."""
    path = Path(run_dir).resolve()
    if not (path / RESULTS_NAME).is_file():
        raise ScenarioError(f"{run_dir}: no results.json; not a finished fedaudit run")
    return Run(path)


def run(scenario: ScenarioLike, *, out: str | os.PathLike = "runs",
        overrides: list[str] | tuple[str, ...] | None = None, progress: bool = True,
        report: bool = False, cache: str | os.PathLike | None = None) -> Run:
    """Validate and run a scenario in this process (Flower's simulation on Ray), like
    ``fedaudit run``; return the :class:`Run`.  ``progress`` shows rich progress bars on
    stderr; ``report`` also writes report.html; ``cache`` is the folder of cached
    reference models (lira, rmia) and attacks on updates' results, default ``$FEDAUDIT_CACHE`` or ``~/.cache/fedaudit``."""
    from fedaudit.console.progress import RichProgress
    from fedaudit.simulation.runner import run as simulate

    resolved = validate(scenario, list(overrides or ()))
    with using_cache(cache):
        if progress:
            with RichProgress(resolved.federation.rounds) as bar:
                run_dir, results = simulate(resolved, out, progress=bar)
        else:
            run_dir, results = simulate(resolved, out)
    result = Run(Path(run_dir).resolve())  # results read back: exactly results.json
    if report:
        result.report()
    return result


@dataclass
class Matrix:
    """A matrix folder (``fedaudit matrix``): ``data`` is its matrix.json."""

    dir: Path
    data: dict

    @property
    def report_path(self) -> Path:
        return self.dir / "report.html"


def matrix(scenario: str | os.PathLike, *, defenses: list[str] | tuple[str, ...] | None = None,
           out: str | os.PathLike | None = None,
           overrides: list[str] | tuple[str, ...] | None = None, resume: bool = False,
           progress: bool = True, cache: str | os.PathLike | None = None) -> Matrix:
    """Run the threat-model matrix of ``scenario`` over ``defenses`` (default: its ``[matrix]
    defenses``) into ``out`` (default: a new ``runs/matrix-<scenario>-<time>``), like
    ``fedaudit matrix``; ``resume`` continues the matrix in ``out``.  Return the
    :class:`Matrix` (matrix.json parsed)."""
    from fedaudit.console.progress import RichProgress
    from fedaudit.defense_matrix import open_matrix_dir, plan_matrix, run_matrix

    plan = plan_matrix(os.fspath(scenario), defenses, list(overrides or ()))
    root = open_matrix_dir(plan, out, resume=resume)
    bar = (lambda run: RichProgress(run.scenario.federation.rounds)) if progress else None
    with using_cache(cache):
        doc = run_matrix(plan, root, progress=bar)
    return Matrix(root, doc)
