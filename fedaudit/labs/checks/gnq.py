"""Checks of lab 5, gradient uniqueness: canaries found by GNQ, GNQ against the attack."""

from __future__ import annotations

import numpy as np
from scipy.stats import percentileofscore, spearmanr

from fedaudit.labs.checks import (as_array, as_number, call, close, direction, fail, ok,
                                  same_values)
from fedaudit.labs.todo import require


def _means(sample_id: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = np.unique(sample_id, return_inverse=True)
    return uniq, np.bincount(inv, weights=score) / np.bincount(inv)


def mean_gnq(fn, gnq: dict) -> None:
    """Task 5.1: ``fn(sample_id, score)`` = (distinct ids sorted, mean score of each)."""
    task = "5.1"
    toy = call(task, fn, np.array([7, 3, 7, 3, 9]), np.array([1.0, 2.0, 3.0, 6.0, 5.0]))
    if not isinstance(toy, (tuple, list)) or len(toy) != 2:
        fail(task, "return a pair (ids, means)")
    ids = as_array(task, toy[0], "ids (toy)")
    means = as_array(task, toy[1], "means (toy)")
    if ids.tolist() != [3, 7, 9] or not np.allclose(means, [4.0, 2.0, 5.0], rtol=0, atol=1e-12):
        fail(task, f"ids [7,3,7,3,9] with scores [1,2,3,6,5] give ids [3,7,9] and means "
                   f"[4,2,5]; you return {ids.tolist()} and {np.round(means, 4).tolist()} "
                   "(np.unique(..., return_inverse=True) and np.bincount with weights)")
    out = call(task, fn, gnq["sample_id"], gnq["score"])
    want_ids, want = _means(gnq["sample_id"], gnq["score"])
    same_values(task, as_array(task, out[0], "ids"), want_ids.astype(np.float64), "ids", 0.0)
    # means of the same float64 numbers, summed in another order: relative 1e-12
    same_values(task, as_array(task, out[1], "means"), want, "means",
                1e-12 * float(np.abs(want).max()))
    ok(task, f"mean GNQ of {len(want_ids)} samples")


def canary_percentiles(values, results: dict) -> None:
    """Task 5.1 (second part): each canary's percentile rank within its client equals
    results.json ``canaries.samples[].percentile``."""
    task = "5.1"
    require(values, task)
    want = {s["sample_id"]: s["percentile"] for s in results["canaries"]["samples"]}
    if not isinstance(values, dict) or set(map(int, values)) != set(want):
        fail(task, f"make a dict {{canary sample id: percentile}} for the canaries {sorted(want)}")
    for sid, p in values.items():
        got = as_number(task, p, f"percentile of {sid}")
        # percentileofscore over the same numbers: exact up to float64 rounding
        if not close(got, want[int(sid)], 1e-9):
            fail(task, f"canary {sid}: your percentile {got:.2f} is "
                       f"{direction(got, want[int(sid)])}; rank it among ITS client's "
                       "samples with scipy.stats.percentileofscore(means, m, kind='weak')")
    ok(task, "canaries' percentiles " + ", ".join(f"{v:.0f}" for v in values.values())
       + f" (mean {results['canaries']['mean_percentile']:.1f})")


def top_k_hits(hits, gnq: dict, client: int, k: int) -> None:
    """Task 5.2: how many canaries are among the client's ``k`` samples of highest mean GNQ."""
    task = "5.2"
    got = as_number(task, hits, "hits")
    mask = gnq["client"] == client
    ids, means = _means(gnq["sample_id"][mask], gnq["score"][mask])
    canary_ids = np.unique(gnq["sample_id"][mask & gnq["canary"]])
    top = ids[np.argsort(-means, kind="stable")[:k]]
    want = int(np.isin(top, canary_ids).sum())
    if got != want:
        fail(task, f"your count {got:g} is {direction(got, want)}: sort client {client}'s "
                   f"samples by mean GNQ, DESCENDING (the most unique first), take the first "
                   f"{k}, count the canaries among them")
    ok(task, f"{want} of the {len(canary_ids)} canaries are in client {client}'s top {k} by GNQ"
       f" (a random pick of {k} of {len(ids)} would find {k * len(canary_ids) / len(ids):.2f})")


def gnq_vs_attack(rho, gnq: dict, scores) -> None:
    """Task 5.3: Spearman between members' mean GNQ and their LOSS score (global model)."""
    task = "5.3"
    got = as_number(task, rho, "rho")
    s = scores
    keep = (s["target"] == "global") & (s["method"] == "loss") & (s["member"] == 1)
    sid, sc = np.asarray(s["sample_id"])[keep], np.asarray(s["score"])[keep]
    ids, means = _means(gnq["sample_id"], gnq["score"])
    has = np.isin(sid, ids)
    want = float(spearmanr(means[np.searchsorted(ids, sid[has])], sc[has]).statistic)
    if not close(got, want, 1e-9):
        hint = (" (its sign is reversed: is one of your two columns negated?)"
                if close(got, -want, 1e-9) else "")
        fail(task, f"your rho {got:.4f} is {direction(got, want)}{hint}: the members' rows of "
                   "scores (target 'global', method 'loss', member 1), each matched to its "
                   "mean GNQ by sample_id, then scipy.stats.spearmanr")
    ok(task, f"Spearman(mean GNQ, LOSS score) over {int(has.sum())} members = {want:.3f}")
