"""``DIR/matrix.json``: the threat-model matrix of every defense, from its runs'
results.json alone (so a resumed or half-finished matrix is rebuilt the same way).

A defense's matrix is :func:`fedaudit.rundir.threat_matrix.threat_matrix` of its main run,
with the sections each malicious server's run wrote (:attr:`fedaudit.servers.Server.sections`)
taken in: the malicious server's row.  Beside the cells: the defense's utility (the main
run's test accuracy) and privacy budget (epsilon at delta, where the defense has one), and
each run's status, folder, seconds and error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fedaudit.defense_matrix.plan import MAIN, MatrixPlan

__all__ = ["FINISHED", "FAILED", "PENDING", "RunRecord", "cells_of", "defense_entry",
           "matrix_document"]

FINISHED, FAILED, PENDING = "finished", "failed", "pending"
FORMAT = 1


@dataclass
class RunRecord:
    """One run's state in matrix.json: ``status`` (pending, finished, failed), its run
    directory relative to the matrix folder, its wall ``seconds`` (this process's, or the
    first process's that ran it) and, when it failed, the ``error`` (one line)."""

    status: str = PENDING
    dir: str | None = None
    seconds: float | None = None
    error: str | None = None
    #: its results.json, when finished (not written to matrix.json)
    results: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "results"}


def merged_results(plan: MatrixPlan, defense: str,
                   records: dict[str, RunRecord]) -> dict[str, Any] | None:
    """The defense's main results with each finished server run's own sections, or None
    while its main run has not finished."""
    from fedaudit.servers import SERVERS

    runs = plan.runs_of(defense)
    main = next((records.get(r.key) for r in runs if r.role == MAIN), None)
    if main is None or main.results is None:
        return None
    merged = dict(main.results)
    for run in runs:
        rec = records.get(run.key)
        if run.role == MAIN or rec is None or rec.results is None:
            continue
        for section in SERVERS.get(run.role).sections:
            if rec.results.get(section) is not None:
                merged[section] = rec.results[section]
    return merged


def defense_entry(plan: MatrixPlan, defense: str,
                  records: dict[str, RunRecord]) -> dict[str, Any]:
    """One defense of matrix.json (module docstring)."""
    from fedaudit.rundir.threat_matrix import matrix_json, threat_matrix

    preset = next(d for d in plan.defenses if d.name == defense)
    runs = plan.runs_of(defense)
    recs = {r.role: records.get(r.key, RunRecord()) for r in runs}
    statuses = {rec.status for rec in recs.values()}
    status = (FINISHED if statuses == {FINISHED} else FAILED if FAILED in statuses
              else PENDING)
    entry: dict[str, Any] = {"name": preset.name, "title": preset.title,
                             "sets": list(preset.sets), "status": status,
                             "runs": {role: rec.as_json() for role, rec in recs.items()}}
    merged = merged_results(plan, defense, records)
    if merged is not None:
        model = merged.get("model") or {}
        d = merged.get("defense") or {}
        entry.update(test_accuracy=model.get("test_accuracy"), epsilon=d.get("epsilon"),
                     delta=d.get("delta"), cells=matrix_json(threat_matrix(merged)))
    return entry


def matrix_document(plan: MatrixPlan, records: dict[str, RunRecord],
                    seconds: float | None = None) -> dict[str, Any]:
    """The whole matrix.json: the plan's scenario and keys, the columns (families) and
    rows (positions), and one entry per defense (:func:`defense_entry`)."""
    from fedaudit.rundir.threat_matrix import POSITIONS, families

    done = sum(r.status == FINISHED for r in records.values())
    return {"format": FORMAT, "scenario": plan.name, "source": plan.scenario,
            "sets": list(plan.sets), "positions": dict(POSITIONS),
            "families": list(families()), "runs_finished": done, "runs": len(plan.runs),
            "seconds": seconds,
            "defenses": [defense_entry(plan, d.name, records) for d in plan.defenses]}


def cells_of(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A matrix.json defense's cells as :class:`fedaudit.rundir.threat_matrix.Cell`
    (position -> family -> cell), for the console's table."""
    from fedaudit.rundir.threat_matrix import Cell

    return {pos: {f: Cell(**c) for f, c in row.items() if f != "sees"}
            for pos, row in (entry.get("cells") or {}).items()}
