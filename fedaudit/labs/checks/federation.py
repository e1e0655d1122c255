"""Checks of lab 1, a federation: label histograms, label skew, per-client accuracy."""

from __future__ import annotations

import numpy as np

from fedaudit.labs.checks import (as_array, as_number, call, close, direction, fail, ok,
                                  same_values)


def label_histograms(fn, labels: np.ndarray, clients, num_classes: int,
                     results: dict | None = None) -> None:
    """Task 1.1: ``fn(labels, clients, num_classes)`` is the (clients, classes) count matrix;
    equal to results.json's ``clients[].label_histogram`` when ``results`` is given."""
    task = "1.1"
    toy = as_array(task, call(task, fn, np.array([0, 2, 2, 1, 0, 2]),
                              [np.array([0, 1, 2]), np.array([3, 4, 5])], 3),
                   "label_histograms (toy case)", shape=(2, 3))
    want = np.array([[1, 0, 2], [1, 1, 1]])
    if np.array_equal(toy, want.T):
        fail(task, "rows must be clients and columns classes; yours are transposed")
    if not np.array_equal(toy, want):
        fail(task, f"toy case: labels [0,2,2,1,0,2], clients [[0,1,2],[3,4,5]] give "
                   f"{toy.tolist()}, expected {want.tolist()}; index the labels with each "
                   "client's sample ids, then np.bincount(..., minlength=num_classes)")
    hist = as_array(task, call(task, fn, labels, clients, num_classes), "label_histograms",
                    shape=(len(clients), num_classes))
    ref = np.stack([np.bincount(labels[ids], minlength=num_classes) for ids in clients])
    if not np.array_equal(hist, ref):
        fail(task, "the histograms of the federation differ from np.bincount of each "
                   "client's labels (did you use the clients' sample ids?)")
    if results is not None:
        stored = np.array([c["label_histogram"] for c in results["clients"]])
        if not np.array_equal(hist, stored):
            fail(task, "your histograms differ from results.json clients[].label_histogram")
    ok(task, f"{len(clients)} clients x {num_classes} classes; client sizes "
             f"{hist.sum(axis=1).tolist()}")


def _skew(hist: np.ndarray) -> float:
    p = hist / hist.sum(axis=1, keepdims=True)
    g = hist.sum(axis=0) / hist.sum()
    return float(np.mean(0.5 * np.abs(p - g).sum(axis=1)))


def label_skew(fn, iid_hist: np.ndarray, dirichlet_hist: np.ndarray) -> None:
    """Task 1.2: ``fn(hist)`` is the mean total-variation distance between each client's
    label distribution and the federation's, ``mean_c 1/2 sum_k |p_ck - p_k|``."""
    task = "1.2"
    toy = np.array([[2, 0], [0, 2]])
    got = as_number(task, call(task, fn, toy), "label_skew(toy)")
    if not close(got, 0.5, 1e-12):
        fail(task, f"two clients [[2,0],[0,2]]: each is 1/2 away from the global (1/2, 1/2) "
                   f"in total variation, so the skew is 0.5; you get {got:.4g}. Normalise "
                   "each row to a distribution, take 1/2 sum |p_c - p| per client, then the "
                   "mean over clients")
    for name, hist in (("iid", iid_hist), ("dirichlet", dirichlet_hist)):
        got = as_number(task, call(task, fn, np.asarray(hist)), f"label_skew({name})")
        want = _skew(np.asarray(hist, dtype=np.float64))
        # float64 sums of at most a few hundred terms: 1e-12 is ~1e4 ulps of margin
        if not close(got, want, 1e-12):
            fail(task, f"label_skew of the {name} partition is {got:.6g}, "
                       f"{direction(got, want)}; it passed the toy case: do all rows have "
                       "the same total (normalise each client's row by ITS size)?")
    ok(task, f"skew iid {_skew(np.asarray(iid_hist, float)):.3f}, "
             f"dirichlet {_skew(np.asarray(dirichlet_hist, float)):.3f}")


def client_accuracy(fn, oracle, data) -> None:
    """Task 1.3: ``fn(oracle, x, y)`` is the fraction of samples whose most probable class
    is the label."""
    task = "1.3"
    ids = data.test
    got = as_number(task, call(task, fn, oracle, data.x[ids], data.y[ids]), "client_accuracy")
    pred = oracle.predict_proba(data.x[ids]).argmax(axis=1)
    want = float(np.mean(pred == data.y[ids]))
    if close(got, 100 * want, 1e-9 * 100):
        fail(task, "return a fraction in [0, 1], not a percentage")
    if close(got, 1 - want, 1e-9):
        fail(task, f"you return the error rate {got:.3f}; accuracy is the fraction correct")
    # the same argmax over the same float64 probabilities: identical predictions
    if not close(got, want, 1e-12):
        fail(task, f"accuracy on the test split: yours {got:.4f} is {direction(got, want)}; "
                   "compare predict_proba(x).argmax(axis=1) with y")
    ok(task, f"test accuracy {want:.3f}")


def per_client_accuracy(values, oracle, data) -> None:
    """Task 1.3 (second part): one accuracy per client, on its own training samples."""
    task = "1.3"
    acc = as_array(task, values, "per_client", shape=(len(data.clients),))
    pred = oracle.predict_proba(data.x).argmax(axis=1)
    want = np.array([np.mean(pred[ids] == data.y[ids]) for ids in data.clients])
    same_values(task, acc, want, "per_client", 1e-12,
                "evaluate on data.x[data.clients[c]] for client c")
    ok(task, "per-client training accuracy " + ", ".join(f"{a:.2f}" for a in want))
