"""``fedaudit compare RUN_DIR...``: one table row per run (defense studies).

Columns: run directory name, scenario name, defense, its epsilon (results.json
``defense.epsilon``: a number, infinite for a defense without noise, empty without a
defense), the one-run DP audit's empirical epsilon lower bound beside it when the run has
one (``epsilon_lb``, results.json ``dp_audit``), release, test accuracy, every attack's AUC
and TPR at 1% FPR against the global model, the mean of the finite r_Qn values, and, for
a run with attacks on updates, what the server rebuilt (:mod:`fedaudit.compare.cells`).
With ``quantized=True`` each quantizer of a run adds a row of its own, with the accuracy
and attack metrics of that quantized release and its r_Qn, so a quantized release is
compared as a defense next to the others (``defense`` reads ``quantized:<quantizer>``,
prefixed by the run's own defense when it has one).

A ``RUN_DIR`` argument may also be a sweep folder (``fedaudit sweep`` output: its run
directories in point order, each row prefixed by the point number and its grid values from
``compare.json``) or any folder of run directories (in name order); see :func:`expand_run_dir`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

from fedaudit.compare.cells import (AUDIT_COLUMNS, CI_SUFFIX, METRIC_KEYS, POSITION_COLUMNS,
                                    UPPER_BOUND_COLUMN, VERDICT_SUFFIX, attack_cells,
                                    defense_of,
                                    epsilon_lower_bound_of, epsilon_of, mean_finite_rqn,
                                    position_cells, update_attack_cells,
                                    update_attack_columns)
from fedaudit.errors import ScenarioError
from fedaudit.report.format import fmt, fmt_ci, fmt_g, method_label, ordered_methods
from fedaudit.rundir.layout import RESULTS_NAME, RUN_MARKERS
from fedaudit.rundir.reading import RunData, load_run, num

#: columns every row has, in table order (attack columns follow, then r_Qn)
BASE_COLUMNS = ("run", "scenario", "defense", "epsilon", "release", "status", "test_accuracy")


def run_rows(run: RunData, quantized: bool = False) -> list[dict[str, Any]]:
    """The rows of one loaded run (global release first, then one per quantizer)."""
    r = run.results
    defense = defense_of(r)
    quant = [e for e in r.get("quantization") or [] if isinstance(e, dict)]
    eps = epsilon_of(r)
    base = {"run": run.path.name, "scenario": run.name, "defense": defense, "epsilon": eps,
            **epsilon_lower_bound_of(r), "release": "global", "status": "ok",
            "test_accuracy": num((r.get("model") or {}).get("test_accuracy")),
            **attack_cells(r.get("attacks")), "rqn_mean": mean_finite_rqn(quant),
            **position_cells(r), **update_attack_cells(r)}
    rows = [base]
    if quantized:
        for e in quant:
            q = str(e.get("quantizer"))
            rows.append({"run": run.path.name, "scenario": run.name,
                         "defense": f"quantized:{q}" if defense == "none"
                         else f"{defense}+quantized:{q}", "epsilon": eps,
                         "release": f"quantized:{q}", "status": "ok",
                         "test_accuracy": num(e.get("test_accuracy")),
                         **attack_cells(e.get("attacks")), "rqn": num(e.get("rqn"))})
    return rows


def _sweep_prefixes(folder: Path) -> dict[str, dict[str, Any]]:
    """``run name -> {point, grid values}`` from a sweep folder's compare.json, in point
    order (empty when the folder has no readable compare.json)."""
    try:
        data = json.loads((folder / "compare.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for row in data if isinstance(data, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get("run"), str) or not row["run"]:
            continue
        keys = list(row)
        prefix = {k: row[k] for k in keys[:keys.index("run")]}
        out.setdefault(row["run"], prefix if "point" in prefix else {})
    return out


def expand_run_dir(path: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """The run directories a ``compare`` argument stands for, each with its row prefix.

    * a run directory (it holds results.json, or is an unfinished run: scenario.toml,
      rounds.jsonl, run.log or checkpoints/): itself, no prefix (:func:`load_run` judges it);
    * a sweep folder (compare.json next to run directories): its finished runs in point
      order, each prefixed by ``point`` and the point's grid values; a failed point (no
      results.json) is left out;
    * any other folder: the sub-folders holding a results.json, in name order.

    Raises :class:`ScenarioError` (one line, naming the path) for a folder that holds no
    finished run; a missing path or a file is left to :func:`load_run`'s error.
    """
    p = Path(path)
    if not p.is_dir() or any((p / m).exists() for m in RUN_MARKERS):
        return [(p, {})]
    try:
        subs = sorted(c for c in p.iterdir() if c.is_dir() and (c / RESULTS_NAME).is_file())
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot list the folder: {exc}".replace("\n", " ")) from None
    if not subs:
        raise ScenarioError(f"{p}: holds no finished fedaudit run (expected a run directory "
                            "with results.json, a sweep folder or a folder of run directories)")
    prefixes = _sweep_prefixes(p)
    order = {name: i for i, name in enumerate(prefixes)}
    subs.sort(key=lambda c: (order.get(c.name, len(order)), c.name))
    return [(c, prefixes.get(c.name, {})) for c in subs]


def compare_rows(run_dirs: Iterable[str | Path], quantized: bool = False) -> list[dict[str, Any]]:
    """One dict per run (and per quantized release when ``quantized``), columns aligned.

    A path may be a run directory, a sweep folder or a folder of run directories
    (:func:`expand_run_dir`).  Every row holds the same keys (:func:`columns` order); a
    metric a run did not produce is None.  Raises :class:`fedaudit.config.ScenarioError`
    for a directory that is not a finished run or a folder without one (all directories
    are checked before any row is built).
    """
    targets = [t for d in run_dirs for t in expand_run_dir(d)]
    runs = [(load_run(d), prefix) for d, prefix in targets]
    rows = [{**prefix, **row} for run, prefix in runs for row in run_rows(run, quantized)]
    return align(rows)


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """Column order: leading keys of the rows (e.g. sweep parameters), the base columns,
    each attack's AUC then TPR@1%FPR in the canonical method order, then r_Qn."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    metric_sfx = tuple(METRIC_KEYS)
    methods = ordered_methods(k[:-len(s)] for k in keys for s in metric_sfx if k.endswith(s))
    metric = [c for m in methods for s in metric_sfx
              for c in (f"{m}{s}", f"{m}{s}{CI_SUFFIX}", f"{m}{s}{VERDICT_SUFFIX}")
              if c in keys or not c.endswith((CI_SUFFIX, VERDICT_SUFFIX))]
    tail = [k for c in ("rqn_mean", "rqn", *POSITION_COLUMNS.values(), UPPER_BOUND_COLUMN,
                        *update_attack_columns()) for k in (c, c + VERDICT_SUFFIX)
            if k in keys]
    head = [k for k in keys if k not in BASE_COLUMNS and k not in metric and k not in tail
            and k not in ("error", *AUDIT_COLUMNS)]
    base = [k for k in BASE_COLUMNS if k in keys]
    audit = [k for k in AUDIT_COLUMNS if k in keys]
    if audit:  # the audit's lower bounds beside the claimed epsilon
        at = base.index("epsilon") + 1 if "epsilon" in base else 0
        base[at:at] = audit
    cols = head + base + metric + tail
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


_HEADERS = {"test_accuracy": "test\nacc", "epsilon": "DP\nepsilon", "epsilon_lb": "audit\neps >=",
            "epsilon_lb_gdp": "audit GDP\neps >=", "mu_lb": "audit\nmu >=",
            "epsilon_lb_gdp_global": "audit GDP\neps >= (global)",
            "rqn_mean": "mean\nr_Qn", "rqn": "quant\nr_Qn", "insider_best": "insider\nbest AUC",
            "server_best": "server\nbest AUC", UPPER_BOUND_COLUMN: "insider best\nround (bound)",
            "rec_psnr": "rebuilt\nPSNR dB", "rec_ssim": "rebuilt\nSSIM",
            "rec_ssim_gain": "SSIM gain\nover prior", "rec_identifiability": "rebuilt\nidentifiable",
            "label_accuracy": "label\nacc"}


def _header(col: str) -> str:
    for sfx, what in (("_auc", "AUC"), ("_tpr_1pct_fpr", "TPR@1%")):
        if col.endswith(sfx):
            return f"{method_label(col[:-len(sfx)])}\n{what}"
    return _HEADERS.get(col, col)


def _cell(col: str, v: Any) -> str:
    if v is None:
        return "–"
    if col in ("rqn", "rqn_mean", "epsilon", *AUDIT_COLUMNS):
        return fmt_g(v)
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def _shown(col: str, row: dict[str, Any]) -> str:
    """What a table shows of ``row``'s ``col``: :func:`_cell`, and an attack's AUC or TPR
    with its 95 % interval where the run has one (``0.619 [0.603, 0.634]``), and the
    verdict in a word where the run has one (``0.619 [0.603, 0.634] leaks``)."""
    from fedaudit.report.format import SHORT_VERDICTS

    ci = row.get(f"{col}{CI_SUFFIX}")
    shown = (fmt_ci(row[col], ci) if ci is not None and row.get(col) is not None
             else _cell(col, row.get(col)))
    verdict = row.get(f"{col}{VERDICT_SUFFIX}")
    if verdict and row.get(col) is not None:
        shown += f" {SHORT_VERDICTS.get(verdict, verdict)}"
    return shown


def _numeric(col: str) -> bool:
    return col.endswith(("_auc", "_fpr")) or col in ("test_accuracy", "rqn", "rqn_mean", "point",
                                                     "epsilon", *AUDIT_COLUMNS,
                                                     *POSITION_COLUMNS.values(),
                                                     UPPER_BOUND_COLUMN)


#: the narrowest a column of names (a transposed table's run column) folds to; the widest
#: the field names of a transposed table get
NARROWEST, LABEL_WIDTH = 12, 24


def _keys(rows: list[dict[str, Any]]) -> list[str]:
    """The columns naming a row: its sweep point (else its run), and its defense too when
    those repeat (``--quantized``: a row per release of a run)."""
    key = "point" if rows and all(r.get("point") is not None for r in rows) else "run"
    return [key] if len({r.get(key) for r in rows}) == len(rows) else [key, "defense"]


def _fields(rows: list[dict[str, Any]]) -> tuple[list[str], str]:
    """The columns a table shows, and a second title line (``scenario quickstart``; "" for
    none) with the text columns that hold one value in every row of several (not the
    :func:`_keys` when all of them would go).  Shown: columns with a value, without ``release``
    (the defense names the quantized release) nor ``status`` when every row is ok."""
    ok = all(r.get("status") == "ok" for r in rows)
    cols = [c for c in (columns(rows) if rows else BASE_COLUMNS) if c != "release"
            and not c.endswith((CI_SUFFIX, VERDICT_SUFFIX))  # in their metric's cell (_shown)
            and not (ok and c == "status") and any(r.get(c) is not None for r in rows)]
    same = [c for c in cols if len(rows) > 1 and not _numeric(c)
            and len({_cell(c, r.get(c)) for r in rows}) == 1]
    if all(k in same for k in _keys(rows)):
        same = [c for c in same if c not in _keys(rows)]
    context = ", ".join(f"{c} {_cell(c, rows[0].get(c))}" for c in same)
    return [c for c in cols if c not in same], f"\n{context}" if context else ""


def rich_table(rows: list[dict[str, Any]], title: str = "fedaudit compare",
               narrowest: bool = False):
    """Rows as one :class:`rich.table.Table`, a row per run, the columns of :func:`_fields`
    (the constant ones in the title): numbers right-aligned and never wrapped, names folded
    when rich needs the room (``narrowest``: at :data:`NARROWEST` cells, to measure)."""
    from rich.table import Table

    cols, context = _fields(rows)
    t = Table(title=title + context, header_style="bold")
    for c in cols:
        if _numeric(c):
            t.add_column(_header(c), justify="right", no_wrap=True)
        else:
            t.add_column(_header(c), overflow="fold", max_width=NARROWEST if narrowest else None)
    for r in rows:
        t.add_row(*[_shown(c, r) for c in cols])
    return t


def transposed_tables(rows: list[dict[str, Any]], title: str, width: int) -> list:
    """Rows as rich Tables with a column per row, headed by its :func:`_keys` (``point 3``, a
    run name), and a row per other field of :func:`_fields`: the fewest tables of near-equal
    size that fit ``width`` with each run column at its narrowest, its widest number or
    :data:`NARROWEST` (names fold, numbers never), a caption under the last.  When not even
    one run fits, rich squeezes the tables."""
    from rich.cells import cell_len
    from rich.table import Table
    from rich.text import Text

    fields, context = _fields(rows)
    keys = [k for k in _keys(rows) if k in fields]  # not those moved to the title
    fields = [f for f in fields if f not in keys]
    head, labels = [_header(k) for k in keys], [_header(f).replace("\n", " ") for f in fields]
    label_width = min(LABEL_WIDTH, max(map(cell_len, ["", *head, *labels])))
    floor = max([NARROWEST] + [cell_len(_shown(f, r)) for r in rows for f in fields
                               if _numeric(f)])

    def table(group, heading="", caption=None, floor: int | None = floor, narrowest=False):
        """The table of ``group``, its run columns ``floor`` cells or more (exactly, when
        ``narrowest``; rich squeezes every column as it needs when ``floor`` is None)."""
        t = Table(title=heading, caption=caption, header_style="bold")
        t.add_column("\n".join(head), overflow="fold", max_width=label_width,
                     width=label_width if floor else None)
        for r in group:
            t.add_column("\n".join(f"point {r[k]}" if k == "point" else _cell(k, r.get(k))
                                   for k in keys),
                         overflow="fold", min_width=floor, width=floor if narrowest else None)
        for f, label in zip(fields, labels):
            cells = [_shown(f, r) for r in group]
            t.add_row(label, *([Text(c, justify="right") for c in cells] if _numeric(f)
                               else cells))
        return t

    def fits(group: list[dict[str, Any]]) -> bool:
        """Whether the table of ``group`` at its narrowest fits ``width``."""
        return _natural_width(table(group, narrowest=True)) <= width

    total = len(rows)  # in n consecutive groups of near-equal size, the largest fitting
    n = next((n for n in range(1, total) if fits(rows[:-(-total // n)])), total)
    groups = [rows[i * total // n:(i + 1) * total // n] for i in range(n)]
    squeeze = not fits(groups[0])  # not even one run fits
    caption = f"transposed to fit {width} columns; --csv or --json give one row per run"
    return [table(g, (f"{title} ({i}/{n})" if n > 1 else title) + context,
                  caption if i == n else None, None if squeeze else floor)
            for i, g in enumerate(groups, 1)]


def layout_tables(rows: list[dict[str, Any]], title: str = "fedaudit compare",
                  width: int | None = None) -> list:
    """The table(s) to print at ``width`` cells (None: no limit): :func:`rich_table` when it
    fits with its names folded at :data:`NARROWEST` cells, else :func:`transposed_tables`.
    Widths are rich's measurements."""
    if width is None or not rows or _natural_width(rich_table(rows, title, True)) <= width:
        return [rich_table(rows, title)]
    return transposed_tables(rows, title, width)


def _natural_width(renderable) -> int:
    """The cells ``renderable`` takes given all it wants (rich's measurement)."""
    from rich.console import Console

    return Console(width=10_000).measure(renderable).maximum


def output_width() -> int | None:
    """The width to print at: ``COLUMNS`` when set (a positive integer), else the
    terminal's width, else None (not a terminal: no limit)."""
    from rich.console import Console

    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    console = Console()
    return console.width if console.is_terminal else None


def print_table(rows: list[dict[str, Any]], title: str = "fedaudit compare") -> None:
    """Print :func:`layout_tables` to stdout at :func:`output_width` (``COLUMNS`` applies
    when stdout is not a terminal too: ``COLUMNS=80 fedaudit compare ... | less``); without
    a width, the one table as wide as it needs."""
    from rich.console import Console

    width = output_width()
    tables = layout_tables(rows, title, width)
    console = Console(width=width or max(80, _natural_width(tables[0])))
    for t in tables:
        console.print(t, highlight=False)
