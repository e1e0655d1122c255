"""Checks of lab 4, Res-MIA: the erosion, the score, the ablations."""

from __future__ import annotations

import numpy as np

from fedaudit.labs.checks import (AUC_TOL, SCORE_TOL, as_array, as_number, call, close,
                                  direction, fail, ok, orientation_hint, same_values)


def erosion(fn) -> None:
    """Task 4.1: ``fn(x, size, upsample)`` = ``upsample(adaptive_avg_pool2d(x, size))`` back
    to the input's size (:func:`attacks.membership.resmia.erode`)."""
    import torch

    from attacks.membership.resmia import erode

    task = "4.1"
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.float32).reshape(2, 1, 4, 4) / 31.0
    for size, mode in ((2, "nearest"), (1, "nearest"), (2, "bilinear")):
        got = call(task, fn, x.clone(), size, mode)
        got = as_array(task, got.detach().numpy() if isinstance(got, torch.Tensor) else got,
                       f"erode(x, {size}, {mode!r})", shape=tuple(x.shape))
        want = erode(x, sizes=[size], upsample=mode)[1].numpy()
        # the same float32 pooling and interpolation: equal to float32 rounding (eps 1.2e-7
        # on values in [0, 1])
        same_values(task, got, want, f"erode(x, {size}, {mode!r})", 1e-6,
                    "average-pool to size x size (F.adaptive_avg_pool2d), then "
                    "F.interpolate back to (H, W) with the given mode"
                    + (" and align_corners=False" if mode == "bilinear" else ""))
    ok(task, "the erosion matches attacks.membership.resmia.erode (nearest and bilinear)")


def score(fn, oracle, x: np.ndarray) -> None:
    """Task 4.2: ``fn(oracle, x, sizes)`` is Res-MIA's endpoint score
    ``(c_0 - c_K) / K`` with ``c_k`` the probability of ``argmax f(x_0)`` on ``x_k``."""
    from attacks.membership.resmia import resmia_scores

    task = "4.2"
    sizes = [4, 2, 1]
    got = as_array(task, call(task, fn, oracle, x, sizes), "resmia_score",
                   shape=(len(x),))
    want = resmia_scores(oracle, x, sizes=sizes)
    if np.allclose(got, -want, atol=SCORE_TOL, rtol=0) and np.abs(want).max() > SCORE_TOL:
        fail(task, "the sign is reversed: a member's confidence DROPS more under erosion, "
                   "so the score is c_0 - c_K (then divided by K)")
    if np.allclose(got, want * len(sizes), atol=SCORE_TOL * len(sizes), rtol=0):
        fail(task, "divide the drop c_0 - c_K by K, the number of erosion steps")
    # probabilities from float32 logits, batched differently: equal to SCORE_TOL
    same_values(task, got, want, "resmia_score", SCORE_TOL,
                "c_k is the probability of the class predicted on the ORIGINAL image "
                "(argmax at x_0), evaluated on each eroded copy x_k")
    ok(task, f"Res-MIA scores of {len(x)} samples match attacks.membership.resmia.resmia_scores")


def ablations(table: dict, oracle, x: np.ndarray, member: np.ndarray, results: dict) -> None:
    """Task 4.3: ``table[(sizes, upsample)] = AUC`` for every combination asked for."""
    from attacks.membership.resmia import resmia_scores
    from fedaudit.metrics import membership_metrics

    task = "4.3"
    if not isinstance(table, dict) or not table:
        fail(task, "make a dict {(sizes, upsample): auc}")
    for key, value in table.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            fail(task, f"keys are pairs (sizes, upsample), got {key!r}")
        sizes, mode = key
        auc = as_number(task, value, f"table[{key!r}]")
        want = membership_metrics(resmia_scores(oracle, x, sizes=list(sizes), upsample=mode),
                                  member)["auc"]
        if auc < 0.5 and close(1 - auc, want, AUC_TOL):
            fail(task, f"{key}: " + orientation_hint(auc))
        if not close(auc, want, AUC_TOL):
            fail(task, f"{key}: your AUC {auc:.4f} is {direction(auc, want)}: Res-MIA's "
                       "scores with exactly these sizes and this upsampling, on target.x")
    default = table.get(((4, 2, 1), "nearest"))
    if default is None:
        fail(task, "include the default setting, key ((4, 2, 1), 'nearest')")
    theirs = results["attacks"]["resmia"]["auc"]
    if not close(float(default), theirs, AUC_TOL):
        fail(task, f"the default setting's AUC {default:.4f} is {direction(default, theirs)} "
                   "for fedaudit's Res-MIA; score target.x with the final model")
    best = max(table, key=table.get)
    ok(task, f"{len(table)} settings; best {best} with AUC {table[best]:.3f} "
             f"(LOSS: {results['attacks']['loss']['auc']:.3f})")
