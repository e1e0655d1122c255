"""Checks of lab 7, the curious server: attacking the models the clients send.

The shared federation attacks every round's client models (``attack.rounds = "all"``), so
a student who scores the model of the first round instead of the last one, or reads the
first round's entry of results.json, gets a different number and is told so.
"""

from __future__ import annotations

import numpy as np

from fedaudit.labs.checks import (AUC_TOL, as_array, as_number, close, direction, fail, ok,
                                  orientation_hint, same_values)
from fedaudit.labs.todo import require


def _rounds(results: dict) -> list[str]:
    return sorted(results["server_view"]["clients"][0]["rounds"], key=int)


def _last(results: dict) -> str:
    return _rounds(results)[-1]


def server_auc(value, results: dict, client: int) -> None:
    """Task 7.1: the LOSS AUC of client ``client``'s audit set against the model it sent
    in the last round equals results.json ``server_view``."""
    task = "7.1"
    got = as_number(task, value, "my_auc")
    rounds = results["server_view"]["clients"][client]["rounds"]
    want = rounds[_last(results)]["loss"]["auc"]
    outsider = results["clients"][client]["attacks"]["loss"]["auc"]
    if close(got, want, AUC_TOL):
        ok(task, f"client {client}: AUC {want:.3f} on the model it sent, {outsider:.3f} on "
                 "the global model")
        return
    if got < 0.5 and close(1 - got, want, AUC_TOL):
        fail(task, orientation_hint(got))
    if close(got, outsider, AUC_TOL):
        fail(task, "that is the AUC against the GLOBAL model; query the oracle of the "
                   "model the client sent (client_oracle(run, client))")
    for r in _rounds(results)[:-1]:
        if close(got, rounds[r]["loss"]["auc"], AUC_TOL):
            fail(task, f"that is the model client {client} sent in round {r}; the server's "
                       "freshest view is the LAST round: client_oracle(run, c) without a round")
    fail(task, f"client {client}: your AUC {got:.4f} is {direction(got, want)}; score "
               "this client's rows of run.scores() (target 'global', method 'loss', "
               "client == c): its members and its own non-members, with log p_y")


def gains(values, results: dict) -> None:
    """Task 7.2: per client, server-view LOSS AUC at the last round minus outsider (global
    model) LOSS AUC."""
    task = "7.2"
    n = len(results["clients"])
    got = as_array(task, values, "gain", shape=(n,))

    def gain(r: str) -> np.ndarray:
        return np.array([results["server_view"]["clients"][c]["rounds"][r]["loss"]["auc"]
                         - results["clients"][c]["attacks"]["loss"]["auc"] for c in range(n)])

    want = gain(_last(results))
    if np.allclose(got, -want, atol=1e-12, rtol=0) and np.abs(want).max() > 0:
        fail(task, "the sign is reversed: server view minus outsider")
    for r in _rounds(results)[:-1]:
        if np.allclose(got, gain(r), atol=1e-12, rtol=0) and not np.allclose(gain(r), want):
            fail(task, f"you read round {r}'s entry; compare the outsider with the server's "
                       "LAST round (max(rounds, key=int): keys are strings)")
    same_values(task, got, want, "gain", 1e-12)  # differences of numbers from results.json
    ok(task, f"the curious server gains {want.mean():+.3f} AUC on average; "
             f"{int((want > 0).sum())} of {n} clients leak more to it")


def fedmia_vs_loss(table, results: dict) -> None:
    """Task 7.3: ``table[method] = (auc, tpr_at_1pct_fpr)`` of the curious server's pooled
    attack for ``loss`` (last round) and ``fedmia`` (each sample's FedMIA score averaged
    over the rounds), equal to results.json ``server_view.pooled``."""
    task = "7.3"
    require(table, task)
    pooled = results["server_view"]["pooled"]
    if not isinstance(table, dict) or set(table) != {"loss", "fedmia"}:
        fail(task, "make a dict {'loss': (auc, tpr), 'fedmia': (auc, tpr)}")
    n1 = sum(c["attack_set"]["members"] for c in results["clients"])
    for method, entry in table.items():
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            fail(task, f"table[{method!r}] must be a pair (auc, tpr_at_1pct_fpr)")
        auc = as_number(task, entry[0], f"{method} auc")
        tpr = as_number(task, entry[1], f"{method} tpr")
        want = pooled[method]
        if auc < 0.5 and close(1 - auc, want["auc"], AUC_TOL):
            fail(task, f"{method}: " + orientation_hint(auc))
        if not close(auc, want["auc"], AUC_TOL):
            hint = (" -- average each sample's FedMIA score over ALL the rounds first "
                    "(one mean per client and sample), then pool" if method == "fedmia"
                    else " -- the LOSS rows of the last round's client models")
            fail(task, f"{method}: your pooled AUC {auc:.4f} is "
                       f"{direction(auc, want['auc'])}{hint}")
        if not close(tpr, want["tpr_at_1pct_fpr"], 2.0 / n1):  # 2 swaps at the threshold
            fail(task, f"{method}: your TPR at 1% FPR is "
                       f"{direction(tpr, want['tpr_at_1pct_fpr'])}: the largest tpr with "
                       "fpr <= 0.01 over the pooled rows")
    loss, fed = pooled["loss"], pooled["fedmia"]
    ok(task, f"pooled server view: LOSS AUC {loss['auc']:.3f} / TPR@1%FPR "
             f"{loss['tpr_at_1pct_fpr']:.3f}, FedMIA AUC {fed['auc']:.3f} / TPR@1%FPR "
             f"{fed['tpr_at_1pct_fpr']:.3f}")
