"""``fedaudit compare RUN_DIR...``: one table row per run (defense studies).

Columns: run directory name, scenario name, defense, its epsilon (results.json
``defense.epsilon``: a number, infinite for a defense without noise, empty without a
defense), the one-run DP audit's empirical epsilon lower bound beside it when the run has
one (``epsilon_lb``, results.json ``dp_audit``), release, test accuracy, every attack's AUC
and TPR at 1% FPR against the global model, and the mean of the finite r_Qn values.
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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from fedaudit.errors import ScenarioError
from fedaudit.report.format import fmt, fmt_g
from fedaudit.report.format import method_label, ordered_methods
from fedaudit.rundir.reading import RESULTS_NAME, RUN_MARKERS, RunData, load_run, num

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


def epsilon_lower_bound_of(results: dict[str, Any]) -> dict[str, float | None]:
    """``{"epsilon_lb": ...}``: the one-run DP audit's empirical lower bound
    (results.json ``dp_audit``), or ``{}`` for a run without the audit."""
    a = results.get("dp_audit")
    return {"epsilon_lb": num(a.get("epsilon_lower_bound"))} if isinstance(a, dict) else {}


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


#: results.json ``attack_positions`` -> compare columns (the best attack's pooled AUC)
POSITION_COLUMNS = {"insider": "insider_best", "curious server": "server_best"}


def _position_cells(r: dict[str, Any]) -> dict[str, float | None]:
    return {POSITION_COLUMNS[p["position"]]: num(p.get("auc"))
            for p in r.get("attack_positions") or []
            if isinstance(p, dict) and p.get("position") in POSITION_COLUMNS}


def run_rows(run: RunData, quantized: bool = False) -> list[dict[str, Any]]:
    """The rows of one loaded run (global release first, then one per quantizer)."""
    r = run.results
    defense = defense_of(r)
    quant = [e for e in r.get("quantization") or [] if isinstance(e, dict)]
    eps = epsilon_of(r)
    base = {"run": run.path.name, "scenario": run.name, "defense": defense, "epsilon": eps,
            **epsilon_lower_bound_of(r), "release": "global", "status": "ok",
            "test_accuracy": num((r.get("model") or {}).get("test_accuracy")),
            **_attack_cells(r.get("attacks")), "rqn_mean": mean_finite_rqn(quant),
            **_position_cells(r)}
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


#: what a run directory holds even before it finished (``create_run_dir``, the runner)
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
    metric_sfx = ("_auc", "_tpr_1pct_fpr")
    methods = ordered_methods(k[:-len(s)] for k in keys for s in metric_sfx if k.endswith(s))
    metric = [f"{m}{s}" for m in methods for s in metric_sfx]
    tail = [k for k in ("rqn_mean", "rqn", *POSITION_COLUMNS.values()) if k in keys]
    head = [k for k in keys if k not in BASE_COLUMNS and k not in metric and k not in tail
            and k not in ("error", "epsilon_lb")]
    base = [k for k in BASE_COLUMNS if k in keys]
    if "epsilon_lb" in keys:  # the audit's lower bound beside the claimed epsilon
        base.insert(base.index("epsilon") + 1 if "epsilon" in base else 0, "epsilon_lb")
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


_HEADERS = {"test_accuracy": "test\nacc", "epsilon": "DP\nepsilon",
            "epsilon_lb": "audit\neps >=", "rqn_mean": "mean\nr_Qn",
            "rqn": "quant\nr_Qn", "release": "release", "status": "status",
            "insider_best": "insider\nbest AUC", "server_best": "server\nbest AUC"}


def _header(col: str) -> str:
    for sfx, what in (("_auc", "AUC"), ("_tpr_1pct_fpr", "TPR@1%")):
        if col.endswith(sfx):
            m = col[:-len(sfx)]
            return f"{method_label(m)}\n{what}"
    return _HEADERS.get(col, col)


def _cell(col: str, v: Any) -> str:
    if v is None:
        return "–"
    if col in ("rqn", "rqn_mean", "epsilon", "epsilon_lb"):
        return fmt_g(v)
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def _numeric(col: str) -> bool:
    return col.endswith(("_auc", "_fpr")) or col in ("test_accuracy", "rqn", "rqn_mean", "point",
                                                     "epsilon", "epsilon_lb",
                                                     *POSITION_COLUMNS.values())


def _shown_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Columns with a value in some row, without ``release`` (the defense column names the
    quantized release) and without ``status`` when every row is ok."""
    cols = [c for c in (columns(rows) if rows else BASE_COLUMNS)
            if any(r.get(c) is not None for r in rows) and c != "release"]
    if rows and all(r.get("status") == "ok" for r in rows):
        cols = [c for c in cols if c != "status"]
    return cols


def rich_table(rows: list[dict[str, Any]], title: str = "fedaudit compare",
               only: Iterable[str] | None = None):
    """Rows as one :class:`rich.table.Table` with every shown column (:func:`_shown_columns`);
    ``only`` keeps the non-metric columns plus the metric columns named.  Numbers never
    wrap; long names fold.  :func:`layout_tables` splits it for a narrow width."""
    from rich.table import Table

    cols = _shown_columns(rows)
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


# ---- fitting a width ---------------------------------------------------------------------

#: text columns never folded while any other layout fits (they hold the quantizer names)
_KEEP_WHOLE = frozenset({"defense", "release"})
_FOLD_CAPS = (48, 40, 32, 28, 24, 20, 16, 12, 10, 8)
_BREAK_AFTER = re.compile(r"[^-_./:+, ]*[-_./:+, ]?")


def _cell_len(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.split("\n")), default=0)


def _height(text: str) -> int:
    return text.count("\n") + 1


def _fold(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` cells, broken after ``-_./:+,`` or a space
    where it can (``quickstart-defended-`` / ``20250101-120000``), inside a word only when
    a piece is longer than the width."""
    from rich.cells import cell_len, chop_cells

    out: list[str] = []
    for para in text.split("\n"):
        cur = ""
        for tok in (t for t in _BREAK_AFTER.findall(para) if t):
            if cell_len((cur + tok).rstrip(" ")) <= width:
                cur += tok
                continue
            if cur.strip():
                out.append(cur.rstrip(" "))
            cur = ""
            pieces = chop_cells(tok.rstrip(" "), width) or [""]
            out.extend(pieces[:-1])
            cur = pieces[-1] + (" " if tok.endswith(" ") else "")
        out.append(cur.rstrip(" "))
    return "\n".join(out)


def _table_width(widths: Iterable[int]) -> int:
    """Width of a rich table (default box, padding 1) with these column widths."""
    widths = list(widths)
    return sum(widths) + 3 * len(widths) + 1


@dataclass
class _Part:
    """One table of a split layout."""
    rows: list[dict[str, Any]]
    ids: list[str]  # identifying columns (left)
    widths: dict[str, int]  # every column of the table
    metrics: list[str]
    context: str  # the columns constant in these rows, for the title


def _metric_groups(metrics: list[str]) -> list[list[str]]:
    """Metric columns in runs that belong together: an attack's AUC and TPR, r_Qn's two."""
    def key(c: str) -> str:
        for sfx in ("_auc", "_tpr_1pct_fpr"):
            if c.endswith(sfx):
                return c[:-len(sfx)]
        return "rqn" if c.startswith("rqn") else "general"
    groups: list[list[str]] = []
    for c in metrics:
        if groups and key(groups[-1][-1]) == key(c):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def _pack(groups: list[list[str]], mw: dict[str, int], avail: int) -> list[list[str]] | None:
    """Metric columns in tables of at most ``avail`` cells each (beyond the identifying
    columns); a group goes whole into one table when it fits in one.  None: a column alone
    does not fit."""
    chunks: list[list[str]] = [[]]
    used = 0
    for g in groups:
        need = sum(mw[c] + 3 for c in g)
        if used + need > avail and chunks[-1] and need <= avail:
            chunks.append([])
            used = 0
        for c in g:
            w = mw[c] + 3
            if w > avail:
                return None
            if used + w > avail:
                chunks.append([])
                used = 0
            chunks[-1].append(c)
            used += w
    return chunks


def _plan_block(rows: list[dict[str, Any]], title: str, width: int,
                keep_whole: frozenset[str]) -> tuple[int, list[_Part], list[str]] | None:
    """The split of these rows that fits ``width`` with the fewest printed lines:
    identifying columns constant over the rows go to the title (its second line); in a
    sweep table (every row has a point, one run per point) the run and error columns go
    to a legend under the tables (``point 3: run ..., error ...``); the other identifying
    columns are on every table (foldable text folded to a common cap), and the metric
    columns are spread over as many tables as needed.  Returns (lines, parts, legend), or
    None when nothing fits."""
    cols = _shown_columns(rows)
    ids = [c for c in cols if not _numeric(c) or c == "point"]
    metrics = [c for c in cols if c not in ids]
    const: list[str] = []
    if len(rows) > 1:
        const = [c for c in ids + [m for m in metrics if m == "epsilon"]
                 if len({_cell(c, r.get(c)) for r in rows}) == 1]
        if ids and all(c in const for c in ids):
            const.remove(ids[0])  # identical rows: keep one identifying column
    context = ", ".join(f"{c} {_cell(c, rows[0].get(c))}" for c in const)
    ids = [c for c in ids if c not in const]
    metrics = [c for c in metrics if c not in const]
    legend: list[str] = []
    run_of: dict[Any, Any] = {}
    if "point" in ids and all(r.get("point") is not None and
                              run_of.setdefault(r["point"], r.get("run")) == r.get("run")
                              for r in rows):
        moved = [c for c in ("run", "error") if c in ids]
        seen: dict[Any, str] = {}
        for r in rows:
            text = ", ".join(f"{c} {_cell(c, r.get(c))}" for c in moved if r.get(c))
            if text and r["point"] not in seen:
                seen[r["point"]] = f"point {_cell('point', r['point'])}: {text}"
        legend = list(seen.values())
        ids = [c for c in ids if c not in moved]

    def natural(c: str) -> int:
        return max([_cell_len(_header(c))] + [_cell_len(_cell(c, r.get(c))) for r in rows])

    nat = {c: natural(c) for c in ids + metrics}
    foldable = [c for c in ids if not _numeric(c) and c not in keep_whole]
    caps = sorted({nat[c] for c in foldable} | set(_FOLD_CAPS), reverse=True)
    groups = _metric_groups(metrics)
    best: tuple[int, list[_Part], list[str]] | None = None
    for cap in caps if foldable else [0]:
        widths = {c: (min(nat[c], cap) if c in foldable else nat[c]) for c in ids}
        id_width = _table_width(widths.values())
        if id_width > width:
            continue
        chunks = _pack(groups, nat, width - id_width) if metrics else [[]]
        if chunks is None:
            continue
        body = sum(max([1] + [_height(_fold(_cell(c, r.get(c)), widths[c])) for c in foldable])
                   for r in rows)
        head = max([1] + [_height(_fold(_header(c), widths[c])) for c in ids]
                   + [_height(_header(c)) for c in metrics])
        lines = sum(-(-_cell_len(t) // width) for t in legend)
        for chunk in chunks:
            tw = id_width + sum(nat[c] + 3 for c in chunk)
            titles = [f"{title} (99/99)"] + ([context] if context else [])
            lines += sum(-(-len(t) // tw) for t in titles) + head + body + 3
        if best is None or lines < best[0]:
            best = (lines, [_Part(rows, ids, {**widths, **{m: nat[m] for m in chunk}}, chunk,
                                  context) for chunk in chunks], legend)
    return best


def _plan(rows: list[dict[str, Any]], title: str,
          width: int) -> tuple[list[_Part], list[str]] | None:
    """The shortest of: all rows in one set of tables, or one set per run (when some run
    has several rows, e.g. ``--quantized``).  Quantizer names stay whole unless nothing
    else fits."""
    for keep in (_KEEP_WHOLE, frozenset()):
        options = []
        one = _plan_block(rows, title, width, keep)
        if one:
            options.append(one)
        blocks: list[list[dict[str, Any]]] = []
        for r in rows:
            if blocks and blocks[-1][-1].get("run") == r.get("run"):
                blocks[-1].append(r)
            else:
                blocks.append([r])
        if 1 < len(blocks) < len(rows):
            plans = [_plan_block(b, title, width, keep) for b in blocks]
            if all(plans):
                options.append((sum(p[0] for p in plans), [x for p in plans for x in p[1]],
                                [x for p in plans for x in p[2]]))
        if options:
            best = min(options, key=lambda o: o[0])
            return best[1], best[2]
    return None


def _part_table(part: _Part, title: str):
    from rich.table import Table

    t = Table(title=title, header_style="bold")
    for c in part.ids + part.metrics:
        w = part.widths[c]
        if _numeric(c):
            t.add_column(_header(c), justify="right", no_wrap=True, width=w)
        else:
            t.add_column(_fold(_header(c), w), overflow="fold", width=w)
    for r in part.rows:
        t.add_row(*[_fold(_cell(c, r.get(c)), part.widths[c]) for c in part.ids],
                  *[_cell(c, r.get(c)) for c in part.metrics])
    return t


def layout_tables(rows: list[dict[str, Any]], title: str = "fedaudit compare",
                  width: int | None = None) -> list:
    """The table(s) to print at ``width`` cells (None: no limit, one table).

    When the one table (:func:`rich_table`) is wider, it is split: identifying columns
    (run, scenario, defense, sweep parameters) that are the same in every row go to the
    title, the others are repeated on every table, and the metric columns (accuracy,
    epsilon, each attack's AUC and TPR@1%FPR together, r_Qn) are spread over as many tables
    as needed; with ``--quantized`` rows of several runs, one set of tables per run when
    that prints fewer lines; in a sweep table the run names and errors follow the tables
    as ``point N: run ..., error ...`` lines (rich Text; the other items are Tables).
    Numbers are never shortened; run names, scenario names, sweep values and errors fold
    (after ``-``, ``_``, ``.``, ``/``, ``:`` where possible); the defense column
    (``quantized:ternary-sparse90``) stays whole unless nothing else fits (below about 55
    cells with ``--quantized``).  Below about 36 cells nothing fits and rich squeezes the
    one table."""
    full = rich_table(rows, title)
    if width is None or _measure(full) <= width:
        return [full]
    plan = _plan(rows, title, width)
    if plan is None:
        return [full]
    from rich.text import Text

    parts, legend = plan
    n = len(parts)
    out: list = [_part_table(p, (f"{title} ({i}/{n})" if n > 1 else title)
                             + (f"\n{p.context}" if p.context else ""))
                 for i, p in enumerate(parts, 1)]
    out += [Text(line, overflow="fold") for line in legend]
    return out


def _measure(renderable) -> int:
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
    """Print the table to stdout within :func:`output_width`.

    The width is the ``COLUMNS`` environment variable when it is set, even when stdout is
    not a terminal (``COLUMNS=80 fedaudit compare ... | less``); else the terminal's width;
    else (a pipe or file, no ``COLUMNS``) the one table gets all the width it needs.  A
    table wider than the width is split as :func:`layout_tables` describes (no line longer
    than the width, no column shrunk to nothing, numbers and quantizer names whole), and a
    last line says so; ``--csv`` / ``--json`` give every column in one table."""
    from rich.console import Console
    from rich.table import Table

    width = output_width()
    tables = layout_tables(rows, title, width)
    if width is None:
        width = max(80, _measure(tables[0]))
    console = Console(width=width)
    for t in tables:
        console.print(t, highlight=False)
    n = sum(isinstance(t, Table) for t in tables)
    if n > 1:
        console.print(f"({n} tables to fit {width} columns; --csv or --json give one table)",
                      highlight=False)
