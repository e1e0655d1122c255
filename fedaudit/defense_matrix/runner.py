"""Run a planned matrix into its folder, resumably.

The folder (``--out DIR``)::

    DIR/
        matrix-plan.json        what was planned (scenario, keys, defenses, runs)
        matrix.json             the matrix so far (rewritten after every run)
        report.html             the matrix report (rewritten after every run)
        runs/<defense>--<role>/<scenario>-<timestamp>/
                                each run's own directory (docs/guide.md section 4)

Runs go one after another, in plan order; each is an ordinary ``fedaudit run`` (Flower's
simulation starts and stops its own Ray session per run: :mod:`fedaudit.simulation.runtime`)
and the reference models and update-attack results are cached in the common cache
(``--cache``) as for any run.  A run that raises is recorded as failed and the matrix goes
on.  ``--resume`` keeps every finished run (its results.json is there), continues an
interrupted one after its last finished round (``fedaudit run --resume``) and runs the rest.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable, ContextManager

from fedaudit.config import ScenarioError, to_toml
from fedaudit.defense_matrix.cells import (FAILED, FINISHED, PENDING, RunRecord,
                                           matrix_document)
from fedaudit.defense_matrix.plan import MAIN, MatrixPlan, MatrixRun
from fedaudit.rundir import atomic_write_text, create_unique_dir
from fedaudit.rundir.layout import RESULTS_NAME, SCENARIO_NAME

log = logging.getLogger("fedaudit")

__all__ = ["MATRIX_NAME", "PLAN_NAME", "REPORT_NAME", "RUNS_DIR", "load_records",
           "open_matrix_dir", "run_matrix"]

PLAN_NAME, MATRIX_NAME, REPORT_NAME, RUNS_DIR = ("matrix-plan.json", "matrix.json",
                                                 "report.html", "runs")


def _plan_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    for key in ("scenario", "sets", "defenses"):
        if old.get(key) != new.get(key):
            return f"{key} was {old.get(key)!r}, now {new.get(key)!r}"
    changed = [n["key"] for o, n in zip(old.get("runs", []), new["runs"]) if o != n]
    if changed or len(old.get("runs", [])) != len(new["runs"]):
        return (f"the run {changed[0]} resolves to another scenario (the scenario file or "
                "fedaudit changed)" if changed else "the runs differ")
    return None


def open_matrix_dir(plan: MatrixPlan, out: str | Path | None, *, resume: bool) -> Path:
    """The matrix folder: ``out`` (created; with ``resume``, the folder of an earlier
    matrix of the same plan), or a new ``runs/matrix-<scenario>-<timestamp>``.  Raise
    :class:`ScenarioError` (nothing written) when ``out`` holds another matrix or other
    files, or ``resume`` finds no matrix there."""
    if out is None:
        if resume:
            raise ScenarioError("--resume needs --out DIR, the folder of the matrix to continue")
        path = create_unique_dir("runs", f"matrix-{plan.name}").resolve()
    else:
        path = Path(out).resolve()
        stored = path / PLAN_NAME
        if resume:
            if not stored.is_file():
                raise ScenarioError(f"--resume: {out} holds no {PLAN_NAME}; not a matrix folder "
                                    "(start one without --resume)")
            try:
                old = json.loads(stored.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ScenarioError(f"--resume: {stored} is unreadable ({exc})") from None
            if (diff := _plan_difference(old, plan.as_json())) is not None:
                raise ScenarioError(f"--resume {out}: not the same matrix: {diff}; give the "
                                    "same scenario, --defenses and --set, or another --out")
            return path
        if stored.is_file():
            raise ScenarioError(f"--out {out} holds a matrix already ({PLAN_NAME}); add "
                                "--resume to continue it, or choose another --out")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ScenarioError(f"--out {out} exists and is not an empty folder; choose a new "
                                "or empty folder")
        path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path / PLAN_NAME, json.dumps(plan.as_json(), indent=1) + "\n")
    return path


def _run_dirs(parent: Path) -> list[Path]:
    return sorted(p for p in parent.iterdir() if (p / SCENARIO_NAME).is_file()) \
        if parent.is_dir() else []


def load_records(plan: MatrixPlan, root: Path) -> dict[str, RunRecord]:
    """Each run's record from the folder: finished where a run directory holds
    results.json (read back), else pending (failed, with its error, when matrix.json says
    so); the seconds and errors come from matrix.json."""
    old: dict[str, dict] = {}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        doc = json.loads((root / MATRIX_NAME).read_text(encoding="utf-8"))
        old = {f"{d['name']}--{role}": rec for d in doc["defenses"]
               for role, rec in d["runs"].items()}
    records = {}
    for run in plan.runs:
        rec = RunRecord()
        prev = old.get(run.key) or {}
        for d in _run_dirs(root / RUNS_DIR / run.key):
            rec.dir = str(d.relative_to(root))
            if (d / RESULTS_NAME).is_file():
                rec.status, rec.seconds = FINISHED, prev.get("seconds")
                rec.results = json.loads((d / RESULTS_NAME).read_text(encoding="utf-8"))
                break
        if rec.status == PENDING and prev.get("status") == FAILED:
            rec.status, rec.error = FAILED, prev.get("error")
        records[run.key] = rec
    return records


ProgressFactory = Callable[[MatrixRun], ContextManager[Any]]


def _honest(plan: MatrixPlan, run: MatrixRun, root: Path,
            records: dict[str, RunRecord]) -> Path | None:
    """A server run's counterfactual: its defense's finished main run (the same federation
    under the honest server), whose same round a malicious server's stage compares with;
    None for the main run itself or when it did not finish."""
    if run.role == MAIN:
        return None
    main = next((records.get(r.key) for r in plan.runs_of(run.defense) if r.role == MAIN),
                None)
    return root / main.dir if main is not None and main.status == FINISHED and main.dir \
        else None


def _run_one(run: MatrixRun, root: Path, rec: RunRecord, progress: Any,
             report: bool, counterfactual: Path | None = None) -> None:
    from fedaudit.simulation.runner import run as simulate

    parent = root / RUNS_DIR / run.key
    partial = next((d for d in _run_dirs(parent)
                    if (d / SCENARIO_NAME).read_text(encoding="utf-8") == to_toml(run.scenario)),
                   None)
    run_dir, _ = simulate(run.scenario, parent, progress=progress, resume_dir=partial,
                          counterfactual=counterfactual)
    rec.dir = str(Path(run_dir).resolve().relative_to(root))
    rec.results = json.loads((Path(run_dir) / RESULTS_NAME).read_text(encoding="utf-8"))
    if report:
        from fedaudit.report import write_report

        try:
            write_report(run_dir)
        except Exception as exc:  # noqa: BLE001 - the run itself is complete
            log.warning("report of %s not written: %s: %s", run_dir, type(exc).__name__, exc)


def write_outputs(plan: MatrixPlan, root: Path, records: dict[str, RunRecord],
                  seconds: float | None) -> dict[str, Any]:
    """matrix.json and report.html from the records (atomic); return the document."""
    from fedaudit.defense_matrix.report import render_matrix_report

    doc = matrix_document(plan, records, seconds)
    atomic_write_text(root / MATRIX_NAME, json.dumps(doc, indent=1) + "\n")
    try:
        atomic_write_text(root / REPORT_NAME, render_matrix_report(doc, root))
    except Exception as exc:  # noqa: BLE001 - matrix.json holds every number
        log.warning("matrix report not written: %s: %s", type(exc).__name__, exc)
    return doc


def run_matrix(plan: MatrixPlan, root: Path, *, report: bool = True,
               progress: ProgressFactory | None = None,
               announce: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every unfinished run of ``plan`` into ``root`` (module docstring); rewrite
    matrix.json and report.html after each; return the final matrix document."""
    announce = announce or log.info
    records = load_records(plan, root)
    t0 = time.perf_counter()
    n = len(plan.runs)
    write_outputs(plan, root, records, None)
    for i, run in enumerate(plan.runs, 1):
        rec = records[run.key]
        label = f"[{i}/{n}] {run.defense}: {run.role} run"
        if rec.status == FINISHED:
            announce(f"{label}: finished earlier, kept ({rec.dir})")
            continue
        announce(label)
        start = time.perf_counter()
        try:
            ctx = progress(run) if progress is not None else contextlib.nullcontext(None)
            with ctx as prog:
                _run_one(run, root, rec, prog, report,
                         counterfactual=_honest(plan, run, root, records))
            rec.status, rec.error = FINISHED, None
        except Exception as exc:  # noqa: BLE001 - record the failure, go on
            log.exception("matrix run %s failed", run.key)
            rec.status = FAILED
            rec.error = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500]
            dirs = _run_dirs(root / RUNS_DIR / run.key)
            rec.dir = str(dirs[-1].relative_to(root)) if dirs else None
            announce(f"{label}: failed: {rec.error}")
        rec.seconds = round(time.perf_counter() - start, 1)
        write_outputs(plan, root, records, None)
    total = sum(r.seconds or 0.0 for r in records.values())
    log.info("matrix done in %.0f s (this process: %.0f s)", total, time.perf_counter() - t0)
    return write_outputs(plan, root, records, round(total, 1))
