"""``geng`` and ``bias-count``: the label counts solved from the last layer's gradient and
the model's mean outputs on dummy inputs (Geng, Mou, Li, Li, Beyan, Decker, Rong 2021,
"Towards General Deep Leakage in Federated Learning", arXiv:2110.09074; for multi-step
updates Dimitrov, Balunovic, Konstantinov, Vechev 2022, "Data Leakage in Federated
Averaging", TMLR, arXiv:2206.12395).

For a batch of N samples with counts c_j, the last layer's gradient of the mean loss is
(:mod:`attacks.label_leakage.last_layer`)

    g_j    = (1/N) sum_k p_kj S_k - (1/N) sum_(k: y_k = j) S_k       (weight row sums)
    beta_j = (1/N) sum_k p_kj     - c_j / N                          (bias)

Assume every sample of the batch has the same probabilities p_k = p and activation sum
S_k = S; then ``g_j = S (p_j - c_j / N)`` and

    geng:        c_j = N (p_j - g_j / S)              (Geng et al.'s estimate)
    bias-count:  c_j = N (p_j - beta_j)               (the same with the bias, whose
                                                       input is the constant 1: S = 1)

with p and S estimated by the model's mean softmax and mean activation sum over dummy
inputs, as Geng et al. do (LeakPro's ``GengLabelInference``: the same formula, the
dummies drawn from a standard normal; here uniform in the data's box by default).

Rounding: the raw counts become the nearest multiset of N labels
(:func:`attacks.label_leakage.allocation.round_counts`), with ``negative_present`` (the
default) at least one label for every class whose row is negative beyond the float
rounding of the update (``LastLayerGradient.*_tolerance``).  For the bias this is
certain: ``beta_j = p_bar_j - c_j / N < 0`` needs c_j >= 1 (breaching's ``analytic``
strategy reads the bias's negative entries the same way; over several steps without
weight decay every step's term of an absent class is >= 0); for the weight rows it needs
S_k >= 0 (LLG's P1).  On a confident trained model p_bar is far from p_hat and the raw
counts mislead, but the signs still hold: the floor is what reads its one-sample updates.

What each assumes, and its error.  Exactly, with p_bar the mean of the client's samples'
probabilities (unknown to the server) and p_hat, S_hat the dummies' estimates:

    bias-count:  raw_j - c_j = N (p_hat_j - p_bar_j)
    geng:        raw_j - c_j = N p_hat_j - (1/S_hat) sum_k p_kj S_k
                               + sum_(k: y_k = j) (S_k / S_hat - 1)

so ``bias-count`` needs only that the client's mean softmax is the dummies' (no
assumption on the activations, no ReLU), and ``geng`` also that every activation sum is
S_hat (a ReLU keeps S_k >= 0 but not equal).  Both are exact when the outputs do not
depend on the input; on an untrained model the softmax is nearly uniform whatever the
input, which is where they work best.  Both need the last layer to produce the logits.

Multi-step updates (T > 1 SGD steps, momentum mu): the observed gradient is the weighted
step average ``g_bar = sum_t w_t g_t`` (w_t = omega_t / Omega, ``observed_gradient``).
With each step's statistics p^t, S^t and the labels spread evenly over the steps,
``g_bar_j = sum_t w_t S^t (p^t_j - c_j / N)``, hence

    c_j = N (sum_t w_t S^t p^t_j - g_bar_j) / sum_t w_t S^t        (S^t = 1 for the bias)

The server knows the start model and the end model (start + update); with ``along_path``
(the default) the statistics of step t are interpolated linearly between the two at the
point the step's gradient was taken, (t - 1) / T of the way (Dimitrov et al.'s
interpolation of the statistics between the start and the end of local training; LeakPro's
``DimitrovLabelInference`` averages the counts of linearly interpolated statistics).
Without it, or for one step, the start model's statistics serve alone.  How far this
holds is measured in docs/algorithms.md section 13.
"""

from __future__ import annotations

import numpy as np

from attacks.label_leakage.allocation import round_counts
from attacks.label_leakage.last_layer import (DUMMY_OPTIONS, LastLayerGradient, dummy_inputs,
                                              end_state, observed_gradient, output_statistics)
from attacks.label_leakage.registry import LabelGuess, register_label_attack
from attacks.update_case import UpdateCase
from fedaudit.options import option

OPTIONS = {
    **DUMMY_OPTIONS,
    "along_path": option(bool, True, "multi-step updates: interpolate the statistics "
                         "between the start and the end model over the local steps"),
    "negative_present": option(bool, True, "a class whose row of the gradient is negative "
                               "(beyond float rounding) gets at least one label"),
}


def _path_statistics(case: UpdateCase, grad: LastLayerGradient, *, dummies: int,
                     dummy: str, seed: int, along_path: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per local step t: the mean softmax p^t (T, C) and mean activation sum S^t (T,)."""
    inputs = dummy_inputs(case, dummies, dummy, seed)
    start = output_statistics(case, case.start, inputs)
    p0, s0 = start.mean_probs(), start.mean_activation_sum()
    if not along_path or grad.steps == 1:
        return np.tile(p0, (grad.steps, 1)), np.full(grad.steps, s0)
    end = output_statistics(case, end_state(case), inputs)
    a = np.arange(grad.steps, dtype=np.float64) / grad.steps
    p = (1 - a)[:, None] * p0 + a[:, None] * end.mean_probs()
    s = (1 - a) * s0 + a * end.mean_activation_sum()
    return p, s


def _present(rows: np.ndarray, tolerance: np.ndarray, n: int) -> np.ndarray:
    """1 for each class whose row is below ``-tolerance`` (the n lowest when more are)."""
    negative = np.flatnonzero(rows < -tolerance)
    negative = negative[np.argsort(rows[negative], kind="stable")][:n]
    floor = np.zeros(len(rows), dtype=np.int64)
    floor[negative] = 1
    return floor


def _guess(case: UpdateCase, use_bias: bool, negative_present: bool,
           options: dict) -> LabelGuess:
    grad = observed_gradient(case)
    if use_bias and grad.bias is None:
        raise ValueError("bias-count reads the last layer's bias, and this model's last "
                         "nn.Linear has none (use geng)")
    p, s = _path_statistics(case, grad, **options)
    if use_bias:
        s = np.ones_like(s)
        rows, tolerance = grad.bias, grad.bias_tolerance
    else:
        rows, tolerance = grad.row_sums(), grad.row_sum_tolerance
    w, n = grad.step_weights, grad.num_samples
    weighted_s = float((w * s).sum())
    if not weighted_s > 0:
        raise ValueError(f"geng divides by the dummies' mean activation sum, which is "
                         f"{weighted_s:g} here (try dummy='uniform', or bias-count)")
    raw = n * ((w * s) @ p - rows) / weighted_s
    floor = _present(rows, tolerance, n) if negative_present else None
    info = {"raw_counts": tuple(raw.tolist()), "mean_probs": tuple((w @ p).tolist()),
            "gradient": grad.describe()}
    if floor is not None:
        info["present"] = tuple(int(j) for j in np.flatnonzero(floor))
    if not use_bias:
        info["activation_sum"] = weighted_s
    return LabelGuess(round_counts(raw, n, floor), info)


@register_label_attack("geng", label="Geng et al.", options=OPTIONS)
def geng(case: UpdateCase, *, dummies: int = 64, dummy: str = "uniform", seed: int = 0,
         along_path: bool = True, negative_present: bool = True) -> LabelGuess:
    """Counts from the weight rows, c_j = N (p_j - g_j / S) (module docstring)."""
    return _guess(case, False, negative_present, dict(dummies=dummies, dummy=dummy,
                                                      seed=seed, along_path=along_path))


@register_label_attack("bias-count", label="bias counts", options=OPTIONS)
def bias_count(case: UpdateCase, *, dummies: int = 64, dummy: str = "uniform", seed: int = 0,
               along_path: bool = True, negative_present: bool = True) -> LabelGuess:
    """Counts from the bias, c_j = N (p_j - beta_j) (module docstring)."""
    return _guess(case, True, negative_present, dict(dummies=dummies, dummy=dummy,
                                                     seed=seed, along_path=along_path))
