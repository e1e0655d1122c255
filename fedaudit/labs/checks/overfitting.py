"""Checks of lab 3, overfitting and leakage: generalisation gap against attack AUC."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from fedaudit.labs.checks import (AUC_TOL, as_array, as_number, call, close, direction, fail,
                                  ok, per_run, same_values)


def _acc(oracle, data, ids) -> float:
    return float(np.mean(oracle.predict_proba(data.x[ids]).argmax(axis=1) == data.y[ids]))


def generalisation_gap(fn, oracle, data) -> None:
    """Task 3.1: ``fn(oracle, data, ids)`` = accuracy on ``ids`` minus test accuracy."""
    task = "3.1"
    ids = data.clients[0]
    got = as_number(task, call(task, fn, oracle, data, ids), "generalisation_gap")
    want = _acc(oracle, data, ids) - _acc(oracle, data, data.test)
    if close(got, -want, 1e-12) and want != 0:
        fail(task, f"your gap is {got:.3f}: the sign is reversed (training minus test)")
    # the same argmax counts: the difference of two exact fractions in float64
    if not close(got, want, 1e-12):
        fail(task, f"client 0: your gap {got:.4f} is {direction(got, want)} (accuracy on "
                   "data.x[ids] minus accuracy on data.x[data.test])")
    ok(task, f"client 0's gap {want:.3f}")


def correlations(gaps, rho_gap, rho_size, oracle, data, results: dict) -> None:
    """Task 3.2: per-client gaps, and the Spearman correlations of the clients' LOSS AUC
    (results.json) with their gap and with their size."""
    task = "3.2"
    n = len(data.clients)
    gaps = as_array(task, gaps, "gaps", shape=(n,))
    test = _acc(oracle, data, data.test)
    want = np.array([_acc(oracle, data, ids) - test for ids in data.clients])
    same_values(task, gaps, want, "gaps", 1e-12, "one gap per client, its own samples")
    auc = np.array([c["attacks"]["loss"]["auc"] for c in results["clients"]])
    size = np.array([c["num_examples"] for c in results["clients"]])
    for name, got, x in (("rho_gap", rho_gap, want), ("rho_size", rho_size, size)):
        value = as_number(task, got, name)
        ref = float(spearmanr(x, auc).statistic)
        # rank correlation of the same numbers: exact up to float64 rounding
        if not close(value, ref, 1e-9):
            fail(task, f"{name} {value:.4f} is {direction(value, ref)}: "
                       "scipy.stats.spearmanr(x, per-client LOSS AUC).statistic with the AUCs "
                       "from results['clients'][c]['attacks']['loss']['auc']")
    ok(task, f"Spearman(gap, AUC) = {float(spearmanr(want, auc).statistic):.2f}, "
             f"Spearman(size, AUC) = {float(spearmanr(size, auc).statistic):.2f} "
             f"over {n} clients")


def epochs_effect(table: dict, runs: dict) -> None:
    """Task 3.3: ``table[name] = (pooled LOSS AUC, generalisation gap of the whole
    training set)`` for each run in ``runs``."""
    from fedaudit.labs.runs import load_target

    task = "3.3"
    per_run(task, table, runs, "table")
    for name, r in runs.items():
        entry = table[name]
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            fail(task, f"table[{name!r}] must be a pair (auc, gap)")
        auc, gap = as_number(task, entry[0], "auc"), as_number(task, entry[1], "gap")
        want_auc = r.results["attacks"]["loss"]["auc"]
        if not close(auc, want_auc, AUC_TOL):
            fail(task, f"{name}: AUC {auc:.4f} is {direction(auc, want_auc)}: take "
                       "runs[name].results['attacks']['loss']['auc']")
        t = load_target(r)
        want_gap = _acc(t.oracle, t.data, t.data.train) - _acc(t.oracle, t.data, t.data.test)
        if not close(gap, want_gap, 1e-12):
            fail(task, f"{name}: gap {gap:.4f} is {direction(gap, want_gap)} (accuracy on "
                       "data.train minus accuracy on data.test)")
    ok(task, "; ".join(f"{k}: AUC {v[0]:.3f}, gap {v[1]:.3f}" for k, v in table.items()))
