"""The cells of a compare row read from one run's results.json: its defense and epsilon,
the DP audit's lower bounds, each attack's AUC and TPR, the attack positions' best AUCs,
and each family of attacks on updates' own columns (``rec_*``, ``label_accuracy`` ...),
each verdict beside its figure (``<column>_verdict``: :mod:`fedaudit.verdicts`)."""

from __future__ import annotations

import math
from typing import Any, Iterable

from fedaudit.rundir.reading import num


def defense_of(results: dict[str, Any]) -> str:
    """The run's defense kind (``none`` when the scenario has no defense section)."""
    scen = results.get("scenario")
    d = scen.get("defense", {}) if isinstance(scen, dict) else {}
    return str(d.get("kind", "none")) if isinstance(d, dict) else "none"


def epsilon_of(results: dict[str, Any]) -> float | None:
    """The run's epsilon (``defense.epsilon``; inf for "inf"), None when not accounted."""
    d = results.get("defense")
    return num(d.get("epsilon")) if isinstance(d, dict) else None


#: the DP audit's bounds: column -> (results.json ``dp_audit`` key, from its ``global`` view)
AUDIT_COLUMNS = {"epsilon_lb": ("epsilon_lower_bound", False), "mu_lb": ("mu_lower_bound", False),
                 "epsilon_lb_gdp": ("epsilon_lower_bound_gdp", False),
                 "epsilon_lb_gdp_global": ("epsilon_lower_bound_gdp", True)}


def epsilon_lower_bound_of(results: dict[str, Any]) -> dict[str, float | None]:
    """The one-run DP audit's empirical lower bounds (results.json ``dp_audit``: Steinke's
    ``epsilon_lb``, the Gaussian-DP ``epsilon_lb_gdp`` and ``mu_lb``, and the gradient
    audit's global-model ``epsilon_lb_gdp_global``), or ``{}`` for a run without it."""
    a = results.get("dp_audit")
    if not isinstance(a, dict):
        return {}
    views = {False: a, True: a.get("global") if isinstance(a.get("global"), dict) else None}
    return {col: num(views[g].get(key)) for col, (key, g) in AUDIT_COLUMNS.items()
            if views[g] is not None and (key in views[g] or not g)}


def mean_finite_rqn(entries: Iterable[dict]) -> float | None:
    """Mean r_Qn over the quantizers whose r_Qn is finite (None when none is)."""
    vals = [num(e.get("rqn")) for e in entries]
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


#: an attack's metric columns: column suffix -> results.json key (its interval: ``<key>_ci``)
METRIC_KEYS = {"_auc": "auc", "_tpr_1pct_fpr": "tpr_at_1pct_fpr"}
#: the suffix of a metric column's 95 % interval column (``loss_auc_ci``: ``[low, high]``)
CI_SUFFIX = "_ci"
#: the suffix of a column's verdict (``loss_auc_verdict``: leaks, no leak beyond delta ...)
VERDICT_SUFFIX = "_verdict"


def _interval(v: Any) -> list[float] | None:
    if not (isinstance(v, (list, tuple)) and len(v) == 2):
        return None
    lo, hi = num(v[0]), num(v[1])
    return None if lo is None or hi is None else [lo, hi]


def attack_cells(attacks: dict[str, Any] | None) -> dict[str, Any]:
    """``<method>_auc`` and ``<method>_tpr_1pct_fpr`` of every attack, in results.json order,
    each followed by its 95 % interval ``..._ci`` (``[low, high]``) where results.json has one
    (runs made before the intervals have none)."""
    out: dict[str, Any] = {}
    for m, v in (attacks or {}).items():
        v = v or {}
        for sfx, key in METRIC_KEYS.items():
            out[f"{m}{sfx}"] = num(v.get(key))
            ci = _interval(v.get(f"{key}_ci"))
            if ci is not None:
                out[f"{m}{sfx}{CI_SUFFIX}"] = ci
        verdict = v.get("verdict")
        if isinstance(verdict, dict) and isinstance(verdict.get("auc"), str):
            out[f"{m}_auc{VERDICT_SUFFIX}"] = verdict["auc"]
    return out


#: results.json ``attack_positions`` -> compare columns (the best attack's pooled AUC)
POSITION_COLUMNS = {"insider": "insider_best", "curious server": "server_best"}
#: the insider's best round's AUC (picked with the labels: an upper bound, not an attack)
UPPER_BOUND_COLUMN = "insider_upper_bound"


def position_cells(r: dict[str, Any]) -> dict[str, Any]:
    """The insider's and the curious server's best AUC, each with the position's verdict
    (the best of the attacks and the most exposed client, Holm) where the run has one."""
    rows = [p for p in r.get("attack_positions") or [] if isinstance(p, dict)]
    out: dict[str, Any] = {POSITION_COLUMNS[p["position"]]: num(p.get("auc")) for p in rows
                           if p.get("position") in POSITION_COLUMNS}
    for p in rows:
        cell = p.get("cell_verdict")
        if p.get("position") in POSITION_COLUMNS and isinstance(cell, dict):
            out[POSITION_COLUMNS[p["position"]] + VERDICT_SUFFIX] = cell.get("outcome")
    for p in rows:  # the insider's best round: an upper bound, in a column of its own
        if isinstance(p.get("best_round_upper_bound"), dict):
            out[UPPER_BOUND_COLUMN] = num(p["best_round_upper_bound"].get("auc"))
    return out


def update_attack_columns() -> list[str]:
    """Every family's columns, in the families' order."""
    from attacks.update_family import families

    return [c for fam in families() for c in fam.column_names]


def update_attack_cells(r: dict[str, Any]) -> dict[str, Any]:
    """Each family of attacks on updates' columns (:meth:`attacks.update_family.
    UpdateAttackFamily.columns`: reconstruction's ``rec_*``, label leakage's
    ``label_accuracy`` ...) and its cell's verdict beside the column it judges
    (:attr:`~attacks.update_family.UpdateAttackFamily.verdict_column`), or ``{}`` for a run
    without them."""
    from attacks.update_family import families
    from fedaudit.verdicts import legacy_outcome

    out: dict[str, Any] = {}
    for fam in families():
        section = r.get(fam.name)
        if isinstance(section, dict):
            out.update({col: num(v) for col, v in fam.columns(section).items()})
            head = fam.cell(section)
            col = fam.verdict_column or (fam.column_names[0] if fam.column_names else None)
            if head is not None and col and legacy_outcome(head.verdict):
                out[col + VERDICT_SUFFIX] = legacy_outcome(head.verdict)
    return out
