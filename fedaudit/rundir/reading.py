"""A finished run directory: its layout, and loading it (shared by report, compare, sweep).

The layout (file names) is :mod:`fedaudit.rundir.layout`.

``scores.npz`` holds one row per (target, method, client, scored sample): every client's
members against that client's class-matched holdout non-members.  The clients draw their
non-members from one holdout, so a holdout sample may appear in several clients' rows.  The
pooled metrics in results.json (``attacks``, ``quantization[].attacks``) count every
distinct scored sample once -- all members against the union of the clients' non-members
(:func:`fedaudit.audit.attack_loop.attack`); :func:`pooled_scores` gives exactly those
samples.

:func:`load_run` reads ``results.json`` (falling back to ``rounds.jsonl`` and
``scenario.toml`` for what it lacks) into a :class:`RunData`; the npz files are read lazily.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedaudit.errors import ScenarioError
from fedaudit.rundir.files import read_jsonl
from fedaudit.rundir.layout import RESULTS_NAME, ROUNDS_NAME, SCENARIO_NAME
from fedaudit.scenario import sections_to_toml


def num(x: Any) -> float | None:
    """A results.json number as float (``"inf"``/``"nan"`` strings included); None if absent."""
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


# ---- loading -----------------------------------------------------------------------------

@dataclass
class RunData:
    """A finished run directory, loaded once; the npz files are read lazily."""
    path: Path
    results: dict[str, Any]
    rounds: list[dict[str, Any]]
    scenario: dict[str, dict[str, Any]]
    scenario_toml: str | None
    _npz: dict[str, dict[str, np.ndarray] | None] = field(default_factory=dict, repr=False)

    def npz(self, name: str) -> dict[str, np.ndarray] | None:
        """Arrays of ``name`` (e.g. ``scores.npz``), or None when the file does not exist."""
        if name not in self._npz:
            p = self.path / name
            if not p.exists():
                self._npz[name] = None
            else:
                with np.load(p, allow_pickle=False) as z:
                    self._npz[name] = {k: z[k] for k in z.files}
        return self._npz[name]

    @property
    def name(self) -> str:
        return str(self.scenario.get("scenario", {}).get("name") or self.path.name)

    def flag(self, section: str, key: str) -> Any:
        """A resolved scenario value, or None when the scenario does not record it."""
        sec = self.scenario.get(section)
        return sec.get(key) if isinstance(sec, dict) else None


def pooled_scores(scores: dict[str, np.ndarray], target: str,
                  method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sample_id, member, score)`` of one (target, method) of ``scores.npz``, each
    distinct sample once: the samples the pooled metrics of results.json were computed on.

    A sample's score does not depend on the client whose set drew it (the attack scores
    each distinct sample once), so the first row of each sample id stands for it.
    """
    sel = np.flatnonzero((scores["target"] == target) & (scores["method"] == method))
    ids = scores["sample_id"][sel]
    _, first = np.unique(ids, return_index=True)
    rows = sel[np.sort(first)]
    return (scores["sample_id"][rows], scores["member"][rows].astype(np.int8),
            scores["score"][rows].astype(np.float64))


def _scenario_from(results: dict[str, Any], run_dir: Path) -> tuple[dict, str | None]:
    """The resolved scenario (results.json first, scenario.toml second) and its TOML text."""
    text = None
    p = run_dir / SCENARIO_NAME
    if p.is_file():
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
    scen = results.get("scenario")
    if isinstance(scen, dict) and scen:
        try:
            return scen, sections_to_toml(scen)
        except Exception:  # noqa: BLE001 - an odd value still leaves scenario.toml
            return scen, text
    if text is not None:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return {}, text
        flat: dict[str, dict] = {}

        def walk(prefix: str, table: dict) -> None:
            values = {k: v for k, v in table.items() if not isinstance(v, dict)}
            if prefix:
                flat[prefix] = values
            for k, v in table.items():
                if isinstance(v, dict):
                    walk(f"{prefix}.{k}" if prefix else k, v)
        walk("", raw)
        return flat, text
    return {}, None


def load_run(run_dir: str | Path) -> RunData:
    """Load a finished run directory or raise :class:`ScenarioError` (one line, names the path)."""
    path = Path(run_dir)
    if not path.exists():
        raise ScenarioError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ScenarioError(f"{path}: not a directory (expected a fedaudit run directory)")
    rp = path / RESULTS_NAME
    if not rp.is_file():
        raise ScenarioError(f"{path}: no {RESULTS_NAME} (not a finished fedaudit run)")
    try:
        results = json.loads(rp.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{rp}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{rp}: cannot read: {exc}".replace("\n", " ")) from None
    if not isinstance(results, dict):
        raise ScenarioError(f"{rp}: not a fedaudit results file (expected a JSON object)")
    rounds = results.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        try:
            rounds = read_jsonl(path / ROUNDS_NAME)
        except (OSError, UnicodeDecodeError):
            rounds = []
    rounds = [r for r in rounds if isinstance(r, dict)]
    scenario, text = _scenario_from(results, path)
    return RunData(path=path, results=results, rounds=rounds, scenario=scenario,
                   scenario_toml=text)
