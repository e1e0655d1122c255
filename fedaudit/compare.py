"""``fedaudit compare RUN_DIR...``: one table row per run (defense studies).

Columns: run directory name, scenario name, defense, its epsilon (results.json
``defense.epsilon``: a number, infinite for a defense without noise, empty without a
defense), release, test accuracy, every attack's AUC and TPR at 1% FPR against the global
model, and the mean of the finite r_Qn values.
With ``quantized=True`` each quantizer of a run adds a row of its own, with the accuracy
and attack metrics of that quantized release and its r_Qn, so a quantized release is
compared as a defense next to the others (``defense`` reads ``quantized:<quantizer>``,
prefixed by the run's own defense when it has one).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Iterable

from fedaudit.report import RunData, fmt, fmt_g, load_run, num, ordered_methods

#: columns every row has, in table order (attack columns follow, then r_Qn)
BASE_COLUMNS = ("run", "scenario", "defense", "epsilon", "release", "status", "test_accuracy")


def defense_of(results: dict[str, Any]) -> str:
    """The run's defense kind (``none`` when the scenario has no defense section)."""
    scen = results.get("scenario")
    d = scen.get("defense", {}) if isinstance(scen, dict) else {}
    return str(d.get("kind", "none")) if isinstance(d, dict) else "none"


def epsilon_of(results: dict[str, Any]) -> float | None:
    """The run's epsilon (``defense.epsilon``; inf for "inf"), None when not accounted."""
    d = results.get("defense")
    return num(d.get("epsilon")) if isinstance(d, dict) else None


def mean_finite_rqn(entries: Iterable[dict]) -> float | None:
    """Mean r_Qn over the quantizers whose r_Qn is finite (None when none is)."""
    vals = [num(e.get("rqn")) for e in entries]
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def _attack_cells(attacks: dict[str, Any] | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for m, v in (attacks or {}).items():
        v = v or {}
        out[f"{m}_auc"] = num(v.get("auc"))
        out[f"{m}_tpr_1pct_fpr"] = num(v.get("tpr_at_1pct_fpr"))
    return out


def run_rows(run: RunData, quantized: bool = False) -> list[dict[str, Any]]:
    """The rows of one loaded run (global release first, then one per quantizer)."""
    r = run.results
    defense = defense_of(r)
    quant = [e for e in r.get("quantization") or [] if isinstance(e, dict)]
    eps = epsilon_of(r)
    base = {"run": run.path.name, "scenario": run.name, "defense": defense, "epsilon": eps,
            "release": "global", "status": "ok",
            "test_accuracy": num((r.get("model") or {}).get("test_accuracy")),
            **_attack_cells(r.get("attacks")), "rqn_mean": mean_finite_rqn(quant)}
    rows = [base]
    if quantized:
        for e in quant:
            q = str(e.get("quantizer"))
            rows.append({"run": run.path.name, "scenario": run.name,
                         "defense": f"quantized:{q}" if defense == "none"
                         else f"{defense}+quantized:{q}", "epsilon": eps,
                         "release": f"quantized:{q}", "status": "ok",
                         "test_accuracy": num(e.get("test_accuracy")),
                         **_attack_cells(e.get("attacks")), "rqn": num(e.get("rqn"))})
    return rows


def compare_rows(run_dirs: Iterable[str | Path], quantized: bool = False) -> list[dict[str, Any]]:
    """One dict per run (and per quantized release when ``quantized``), columns aligned.

    Every row holds the same keys (:func:`columns` order); a metric a run did not produce
    is None.  Raises :class:`fedaudit.config.ScenarioError` for a directory that is not a
    finished run (all directories are checked before any row is built).
    """
    runs = [load_run(d) for d in run_dirs]
    rows = [row for run in runs for row in run_rows(run, quantized)]
    return align(rows)


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """Column order: leading keys of the rows (e.g. sweep parameters), the base columns,
    each attack's AUC then TPR@1%FPR in the canonical method order, then r_Qn."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    metric_sfx = ("_auc", "_tpr_1pct_fpr")
    methods = ordered_methods(k[:-len(s)] for k in keys for s in metric_sfx if k.endswith(s))
    metric = [f"{m}{s}" for m in methods for s in metric_sfx]
    tail = [k for k in ("rqn_mean", "rqn") if k in keys]
    head = [k for k in keys if k not in BASE_COLUMNS and k not in metric and k not in tail
            and k != "error"]
    cols = head + [k for k in BASE_COLUMNS if k in keys] + metric + tail
    if "error" in keys:
        cols.append("error")
    return cols


def align(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every column present (None where a run lacks it), in column order."""
    cols = columns(rows)
    return [{c: r.get(c) for c in cols} for r in rows]


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def to_json(rows: list[dict[str, Any]]) -> str:
    """Rows as a JSON array (infinite r_Qn as the string "inf", like results.json)."""
    return json.dumps([{k: _json_value(v) for k, v in r.items()} for r in rows], indent=2,
                      allow_nan=False) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV with a header line (empty cell = not measured)."""
    buf = io.StringIO()
    cols = columns(rows) if rows else list(BASE_COLUMNS)
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else _json_value(r.get(k))) for k in cols})
    return buf.getvalue()


_HEADERS = {"test_accuracy": "test\nacc", "epsilon": "epsilon", "rqn_mean": "mean\nr_Qn", "rqn": "r_Qn",
            "release": "release", "status": "status"}


def _header(col: str) -> str:
    from fedaudit.report import METHOD_LABELS

    for sfx, what in (("_auc", "AUC"), ("_tpr_1pct_fpr", "TPR@1%")):
        if col.endswith(sfx):
            m = col[:-len(sfx)]
            return f"{METHOD_LABELS.get(m, m)}\n{what}"
    return _HEADERS.get(col, col)


def _cell(col: str, v: Any) -> str:
    if v is None:
        return "–"
    if col in ("rqn", "rqn_mean", "epsilon"):
        return fmt_g(v)
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def _numeric(col: str) -> bool:
    return col.endswith(("_auc", "_fpr")) or col in ("test_accuracy", "rqn", "rqn_mean", "point",
                                                     "epsilon")


def rich_table(rows: list[dict[str, Any]], title: str = "fedaudit compare",
               only: Iterable[str] | None = None):
    """Rows as a :class:`rich.table.Table`.  Columns without any value are left out, and so
    are ``release`` (the defense column names the quantized release) and ``status`` when
    every row is ok; ``only`` keeps the non-metric columns plus the metric columns named.
    Numbers never wrap; long names fold."""
    from rich.table import Table

    cols = [c for c in (columns(rows) if rows else BASE_COLUMNS)
            if any(r.get(c) is not None for r in rows) and c != "release"]
    if rows and all(r.get("status") == "ok" for r in rows):
        cols = [c for c in cols if c != "status"]
    if only is not None:
        keep = set(only)
        cols = [c for c in cols if not _numeric(c) or c == "point" or c in keep]
    t = Table(title=title, header_style="bold")
    for c in cols:
        if _numeric(c):
            t.add_column(_header(c), justify="right", no_wrap=True)
        else:
            t.add_column(_header(c), overflow="fold", min_width=min(12, len(c) + 2))
    for r in rows:
        t.add_row(*[_cell(c, r.get(c)) for c in cols])
    return t


def print_table(rows: list[dict[str, Any]], title: str = "fedaudit compare") -> None:
    """Print the table to stdout.  When stdout is not a terminal the table gets the width
    it needs; in a terminal too narrow for it, the AUC and the TPR@1%FPR columns go to two
    tables (``--csv`` / ``--json`` give everything in one)."""
    from rich.console import Console

    table = rich_table(rows, title)
    console = Console()
    need = Console(width=10_000).measure(table).maximum
    if not console.is_terminal:
        Console(width=max(80, need)).print(table)
        return
    if need <= console.width:
        console.print(table)
        return
    cols = columns(rows) if rows else []
    auc = [c for c in cols if c.endswith("_auc") or c in ("test_accuracy", "rqn", "rqn_mean",
                                                          "epsilon")]
    tpr = [c for c in cols if c.endswith("_tpr_1pct_fpr")]
    console.print(rich_table(rows, f"{title}: accuracy, AUC, r_Qn", only=auc))
    console.print(rich_table(rows, f"{title}: TPR at 1% FPR", only=tpr))
    console.print("(terminal too narrow for one table; --csv or --json give all columns)")
