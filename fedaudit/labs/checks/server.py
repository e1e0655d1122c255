"""Checks of lab 7, the curious server: attacking the models the clients send."""

from __future__ import annotations

import numpy as np

from fedaudit.labs.checks import AUC_TOL, as_array, as_number, close, fail, ok, same_values


def _last(results: dict) -> str:
    return max(results["server_view"]["clients"][0]["rounds"], key=int)


def server_auc(value, results: dict, client: int) -> None:
    """Task 7.1: the LOSS AUC of client ``client``'s audit set against the model it sent
    in the last round equals results.json ``server_view``."""
    task = "7.1"
    got = as_number(task, value, "my_auc")
    entry = results["server_view"]["clients"][client]
    want = entry["rounds"][_last(results)]["loss"]["auc"]
    outsider = results["clients"][client]["attacks"]["loss"]["auc"]
    if close(got, outsider, AUC_TOL) and not close(got, want, AUC_TOL):
        fail(task, f"{got:.4f} is the AUC against the GLOBAL model; query the oracle of the "
                   "model the client sent (client_oracle(run, client))")
    if not close(got, want, AUC_TOL):
        fail(task, f"client {client}: your AUC {got:.4f}, server_view says {want:.4f}; score "
                   "this client's rows of run.scores() (target 'global', method 'loss', "
                   "client == c): its members and its own non-members")
    ok(task, f"client {client}: AUC {want:.3f} on the model it sent, {outsider:.3f} on the "
             "global model")


def gains(values, results: dict) -> None:
    """Task 7.2: per client, server-view LOSS AUC minus outsider (global model) LOSS AUC."""
    task = "7.2"
    n = len(results["clients"])
    got = as_array(task, values, "gain", shape=(n,))
    last = _last(results)
    want = np.array([results["server_view"]["clients"][c]["rounds"][last]["loss"]["auc"]
                     - results["clients"][c]["attacks"]["loss"]["auc"] for c in range(n)])
    if np.allclose(got, -want, atol=1e-12, rtol=0) and np.abs(want).max() > 0:
        fail(task, "the sign is reversed: server view minus outsider")
    same_values(task, got, want, "gain", 1e-12)  # differences of numbers from results.json
    ok(task, f"the curious server gains {want.mean():+.3f} AUC on average; "
             f"{int((want > 0).sum())} of {n} clients leak more to it")
