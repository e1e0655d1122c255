"""``fedaudit sweep SCENARIO --grid key=v1,v2 ...``: run the cartesian product of grid values.

Every point is an ordinary run directory under one sweep directory
``OUT/sweep-<scenario>-<timestamp>/``; after each point the sweep (re)writes
``compare.csv`` and ``compare.json`` there (the :mod:`fedaudit.compare` rows, prefixed by
the point number and its grid values), so an interrupted sweep keeps what it finished.

All points are validated (schema, and the data/model of every distinct data setup) before
anything is created: one bad value is a one-line :class:`ScenarioError` and nothing is
written.  A point whose run raises is recorded as ``status = failed`` with the error, and
the sweep goes on.  Values are written like ``--set`` values (TOML syntax, bare words as
strings) and split on the commas that are not inside brackets, braces or quotes:
``--grid audit.quantization.quantizers=['fp32','int4'],['binary']`` has two values.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable

from fedaudit.config import ScenarioError, load_scenario, parse_override
from fedaudit.rundir import create_unique_dir
from fedaudit.scenario import Scenario

log = logging.getLogger("fedaudit")


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid``: a scenario key and its raw (TOML text) values."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class SweepPoint:
    """One point of the product: its overrides, parsed values and resolved scenario."""

    index: int  # 1-based
    overrides: tuple[str, ...]  # the grid's key=value strings, applied after --set
    params: dict[str, Any]
    scenario: Scenario

    @property
    def label(self) -> str:
        return " ".join(self.overrides)


def split_values(raw: str) -> list[str]:
    """Split on commas outside brackets, braces and quotes; strip each part."""
    parts, buf, depth, quote = [], [], 0, ""
    for ch in raw:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    parts.append("".join(buf).strip())
    if quote or depth != 0:
        raise ScenarioError(f"--grid value list {raw!r}: unbalanced quotes or brackets")
    return parts


def parse_grid(spec: str) -> GridAxis:
    """``section.key=v1,v2,...`` -> :class:`GridAxis` (the key and values checked later)."""
    if "=" not in spec:
        raise ScenarioError(f"--grid {spec!r}: expected section.key=value1,value2,...")
    key, raw = spec.split("=", 1)
    key = key.strip()
    values = split_values(raw)
    if not key or any(v == "" for v in values):
        raise ScenarioError(f"--grid {spec!r}: empty key or value (expected "
                            "section.key=value1,value2,...)")
    if len(set(values)) != len(values):
        raise ScenarioError(f"--grid {spec!r}: lists a value twice")
    return GridAxis(key, tuple(values))


def _data_key(scenario: Scenario) -> str:
    """Sections that decide the data split and the model's input shape."""
    return repr((scenario.scenario, scenario.data, scenario.federation, scenario.canaries,
                 scenario.model, scenario.audit.dp))


def check_data(scenario: Scenario) -> None:
    """What ``fedaudit run`` checks before training: data availability and model shape."""
    from fedaudit.data import build_federated_data
    from fedaudit.servers import served_model

    served_model(scenario, build_federated_data(scenario), seed=scenario.seed)


def plan_sweep(scenario: str, grids: list[str], sets: Iterable[str] = (), *,
               data_check: bool = True) -> list[SweepPoint]:
    """Every point of the grid, each fully validated; raise :class:`ScenarioError` on the
    first bad one (nothing has been written at that point)."""
    if not grids:
        raise ScenarioError("sweep: give at least one --grid section.key=v1,v2,...")
    sets = list(sets)
    load_scenario(scenario, sets)  # the base scenario and --set values on their own
    axes = [parse_grid(g) for g in grids]
    keys = [a.key for a in axes]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise ScenarioError(f"--grid {dup}: the same key is given in two --grid options")
    points: list[SweepPoint] = []
    combos = list(itertools.product(*[[f"{a.key}={v}" for v in a.values] for a in axes]))
    for i, combo in enumerate(combos, 1):
        params = {}
        for text in combo:
            section, key, value = parse_override(text)
            params[f"{section}.{key}"] = value
        try:
            resolved = load_scenario(scenario, sets + list(combo))
        except ScenarioError as exc:
            raise ScenarioError(f"--grid point {i}/{len(combos)} ({' '.join(combo)}): "
                                f"{exc}") from None
        points.append(SweepPoint(i, tuple(combo), params, resolved))
    if data_check:
        seen: set[str] = set()
        for p in points:
            k = _data_key(p.scenario)
            if k not in seen:
                seen.add(k)
                try:
                    check_data(p.scenario)
                except ScenarioError as exc:
                    raise ScenarioError(f"--grid point {p.index}/{len(points)} "
                                        f"({p.label}): {exc}") from None
    return points


def _failed_row(point: SweepPoint, run_name: str, exc: BaseException) -> dict[str, Any]:
    return {"run": run_name, "scenario": point.scenario.name,
            "defense": point.scenario.defense.kind, "release": "global", "status": "failed",
            "error": f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500]}


def write_tables(sweep_dir: Path, rows: list[dict[str, Any]]) -> None:
    """``compare.csv`` and ``compare.json`` (atomic)."""
    from fedaudit.compare import to_csv, to_json
    from fedaudit.rundir import atomic_write_text

    atomic_write_text(sweep_dir / "compare.csv", to_csv(rows))
    atomic_write_text(sweep_dir / "compare.json", to_json(rows))


ProgressFactory = Callable[[SweepPoint], ContextManager[Any]]


def run_points(points: list[SweepPoint], sweep_dir: Path, *, quantized: bool = False,
               report: bool = True, progress: ProgressFactory | None = None,
               announce: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Run every point into ``sweep_dir``; return the aligned compare rows."""
    from fedaudit.compare import align, run_rows
    from fedaudit.report import write_report
    from fedaudit.rundir.reading import load_run
    from fedaudit.simulation.runner import run

    announce = announce or log.info
    rows: list[dict[str, Any]] = []
    for p in points:
        announce(f"[{p.index}/{len(points)}] {p.label}")
        before = set(sweep_dir.iterdir())
        prefix = {"point": p.index, **p.params}
        try:
            ctx = progress(p) if progress is not None else contextlib.nullcontext(None)
            with ctx as prog:
                run_dir, _ = run(p.scenario, sweep_dir, progress=prog)
            if report:
                try:
                    write_report(run_dir)
                except Exception as exc:  # noqa: BLE001 - the run itself is fine
                    announce(f"[{p.index}/{len(points)}] report failed: "
                             f"{type(exc).__name__}: {exc}")
            new = [{**prefix, **r} for r in run_rows(load_run(run_dir), quantized)]
        except Exception as exc:  # noqa: BLE001 - record the failure, go on
            created = sorted(set(sweep_dir.iterdir()) - before)
            name = next((c.name for c in created if c.is_dir()), "")
            log.exception("sweep point %s failed", p.label)
            announce(f"[{p.index}/{len(points)}] failed: {type(exc).__name__}: {exc}")
            new = [{**prefix, **_failed_row(p, name, exc)}]
        rows = align(rows + new)
        write_tables(sweep_dir, rows)
    return rows


def run_sweep(scenario: str, grids: list[str], sets: Iterable[str] = (),
              out: str | Path = "runs", *, quantized: bool = False, report: bool = True,
              progress: ProgressFactory | None = None,
              announce: Callable[[str], None] | None = None) -> tuple[Path, list[dict]]:
    """Validate every point, then run them all; return (sweep directory, rows).  The sweep
    directory is absolute (resolved), like the run directory ``fedaudit run`` prints."""
    sets = list(sets)
    points = plan_sweep(scenario, grids, sets)
    sweep_dir = create_unique_dir(
        out, "sweep-" + load_scenario(scenario, sets).name).resolve()
    rows = run_points(points, sweep_dir, quantized=quantized, report=report,
                      progress=progress, announce=announce)
    return sweep_dir, rows
