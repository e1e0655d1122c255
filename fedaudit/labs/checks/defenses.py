"""Checks of lab 6, defenses: DP-SGD's epsilon and its bound on any attack, update
clipping, quantization scored by r_Qn."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import spearmanr

from fedaudit.labs.checks import (AUC_TOL, EXACT_REL, as_number, call, close, direction, fail,
                                  ok, per_run)
from fedaudit.labs.todo import require

_KEYS = ("epsilon", "accuracy", "auc", "tpr_at_1pct_fpr")
_WHERE = {"epsilon": "['defense']['epsilon']", "accuracy": "['model']['test_accuracy']",
          "auc": "['attacks']['loss']['auc']",
          "tpr_at_1pct_fpr": "['attacks']['loss']['tpr_at_1pct_fpr']"}


def _epsilon(results: dict) -> float:
    eps = (results.get("defense") or {}).get("epsilon")
    return math.inf if eps is None or eps == "inf" else float(eps)


def summary_rows(rows: dict, runs: dict) -> None:
    """Task 6.1: ``rows[name]`` = dict with epsilon (``inf`` when the run has no finite
    epsilon), test accuracy, and the LOSS attack's AUC and TPR at 1% FPR."""
    task = "6.1"
    per_run(task, rows, runs, "rows")
    for name, r in runs.items():
        row = rows[name]
        if not isinstance(row, dict) or set(row) != set(_KEYS):
            fail(task, f"rows[{name!r}] must be a dict with the keys {', '.join(_KEYS)}")
        res = r.results
        want = {"epsilon": _epsilon(res), "accuracy": res["model"]["test_accuracy"],
                "auc": res["attacks"]["loss"]["auc"],
                "tpr_at_1pct_fpr": res["attacks"]["loss"]["tpr_at_1pct_fpr"]}
        for key in _KEYS:
            got = row[key]
            if key == "epsilon" and (got is None or got == "inf"):
                fail(task, f"{name}: epsilon must be a number; use math.inf when "
                           "results['defense']['epsilon'] is None (no defense) or 'inf' "
                           "(no noise)")
            try:
                value = float(got)
            except (TypeError, ValueError):
                fail(task, f"{name}: {key} must be a number, got {got!r}")
            if math.isinf(want[key]):
                if not math.isinf(value):
                    fail(task, f"{name}: epsilon is infinite for this run (no noise), you "
                               f"give {value}")
                continue
            # copied from results.json: float64 exactly
            if not close(value, want[key], EXACT_REL * max(1.0, abs(want[key]))):
                fail(task, f"{name}: {key} {value!r} is {direction(value, want[key])}: copy "
                           f"it from this run's results.json ({_WHERE[key]})")
    ok(task, f"{len(rows)} runs summarised")


def dp_bound(fn) -> None:
    """Task 6.2: ``fn(epsilon, delta, fpr)`` = ``min(1, e^epsilon * fpr + delta)``, the
    largest TPR any attack can reach at that FPR against an (epsilon, delta)-DP mechanism
    (the hypothesis-testing view of DP, Kairouz, Oh, Viswanath 2015)."""
    task = "6.2"
    for eps, delta, fpr in ((1.0, 1e-5, 0.01), (0.0, 0.0, 0.2), (10.0, 1e-5, 0.01),
                            (math.inf, 1e-5, 0.01)):
        got = as_number(task, call(task, fn, eps, delta, fpr), "bound")
        want = 1.0 if math.isinf(eps) else min(1.0, math.exp(eps) * fpr + delta)
        if not close(got, want, 1e-12):
            hint = (" -- a TPR can never exceed 1" if got > 1 else "")
            fail(task, f"bound(epsilon={eps}, delta={delta}, fpr={fpr}) is {got:.6g}, "
                       f"{direction(got, want)}: TPR <= e^epsilon * FPR + delta{hint}")
    ok(task, "TPR <= min(1, e^epsilon FPR + delta)")


def meaningful_epsilon(value, delta: float) -> None:
    """Task 6.2 (second part): the largest epsilon whose bound at FPR 1% stays <= 0.5."""
    task = "6.2"
    got = as_number(task, value, "eps_star")
    want = math.log((0.5 - delta) / 0.01)
    if not close(got, want, 1e-9):
        fail(task, f"your epsilon {got:.4f} is {direction(got, want)}: solve "
                   "e^eps * 0.01 + delta = 0.5 for eps (a natural log)")
    ok(task, f"epsilon <= {want:.2f} keeps every attack's TPR at 1% FPR <= 0.5")


def quantization_table(table, results: dict) -> None:
    """Task 6.3: ``table`` = list of (quantizer, r_Qn, LOSS AUC) and the Spearman
    correlation between r_Qn and AUC (results.json ``rqn_vs_attack``)."""
    task = "6.3"
    rows, rho = require(table, task)
    entries = results["quantization"]
    if not isinstance(rows, list) or len(rows) != len(entries):
        fail(task, f"one row per quantizer ({len(entries)})")
    for row, e in zip(rows, entries):
        if len(row) != 3 or row[0] != e["quantizer"]:
            fail(task, f"rows are (quantizer, rqn, auc) in results order; expected "
                       f"{e['quantizer']!r} first in this row, got {row!r}")
        rqn = math.inf if e["rqn"] == "inf" else e["rqn"]
        if not (row[1] == rqn or close(float(row[1]), rqn, EXACT_REL * max(1, abs(rqn)))):
            fail(task, f"{e['quantizer']}: r_Qn {row[1]!r} is not this quantizer's rqn in "
                       "results.json (use math.inf for 'inf')")
        if not close(float(row[2]), e["attacks"]["loss"]["auc"], AUC_TOL):
            fail(task, f"{e['quantizer']}: AUC {row[2]!r} is "
                       f"{direction(float(row[2]), e['attacks']['loss']['auc'])}: take the "
                       "quantized release's ['attacks']['loss']['auc']")
    want = spearmanr([r[1] for r in rows], [r[2] for r in rows]).statistic
    got = as_number(task, rho, "rho")
    if not (np.isnan(want) or close(got, float(want), 1e-9)):
        fail(task, f"your Spearman(r_Qn, AUC) {got:.4f} is {direction(got, float(want))}: "
                   "scipy.stats.spearmanr over your rows' r_Qn and AUC")
    stored = results.get("rqn_vs_attack", {}).get("loss", {}).get("spearman")
    ok(task, f"Spearman(r_Qn, AUC) = {got:.2f} over {len(rows)} quantizers "
             f"(results.json rqn_vs_attack: {stored})")
