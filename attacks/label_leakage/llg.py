"""``llg`` and ``llg-star``: Label Leakage from Gradients (Wainakh, Ventola, Muessig, Keim,
Garcia Cordero, Zimmer, Grube, Kersting, Muehlhaeuser 2022, "User-Level Label Leakage from
Gradients in Federated Learning", PoPETs 2022(2); arXiv:2105.09369), after the
algorithm of the paper and its authors' code (``Predictor.py`` of tklab-tud/LLG: ``LLG``
and ``LLG*``).

Both read the row sums of the last layer's weight gradient,
``g_j = (1/N) sum_k (p_kj - y_kj) S_k`` (:mod:`attacks.label_leakage.last_layer`), and
rely on the paper's two properties, which need non-negative inputs of the last layer
(S_k >= 0, a ReLU before it):

* P1 (direction): g_j < 0 only if class j is in the batch (a sample of another class adds
  ``p_kj S_k / N >= 0`` to row j);
* P2 (magnitude): each occurrence of class j lowers g_j by about the same amount, the
  *impact* m < 0 (exactly ``-(1 - p_kj) S_k / N`` for sample k).

The algorithm, for N samples and C classes:

    stage 1:  every class with g_j < 0 gets one label (most negative first, at most N),
              and g_j <- g_j - m for each
    stage 2:  until N labels: the class with the lowest g_j gets one more, g_j <- g_j - m

``llg`` knows only the gradient and estimates the impact from it,

    m = (1 + 1/C) (1/N) sum_(j: g_j < 0) g_j                                   (LLG)

(the negative rows hold the present classes' occurrences, their own positive offsets
pulling the sum towards 0; the factor (1 + 1/C) is the paper's correction).
``llg-star`` (the paper's LLG*: the adversary knows the model and feeds it dummy data)
estimates the impact and each class's offset from the model's outputs on dummy inputs
x_1..x_D (probabilities p_k, activation sums S_k):

    m   = (1 + 1/C) / (C N) sum_i mean_k (p_ki - 1) S_k   (the mean row-i gradient of a
          dummy batch all of class i, per occurrence in a batch of N)
    s_j = mean_k p_kj S_k                                  (row j of a dummy batch that
          holds no class j: what the other samples add to it)

and runs the two stages on ``g_j - s_j`` (stage 1 still picks the classes whose g_j, not
g_j - s_j, is negative).  The authors draw a new dummy batch for each class and average
ten repetitions; with one set of D dummies for every class, s_j no longer depends on the
batch's class (the same expectation).  When the client's probabilities are uniform
(p = 1/C, an untrained model), (1 - 1/C)(1 + 1/C) = 1 - 1/C^2: the factor nearly undoes
the (1 - p) of the measured impact, so m is about -S/N, the exact step of
``g_j - s_j = -c_j S / N``.

Departures from the authors' code: stage 1 takes the negative classes most negative first
and stops at N labels (their LLG+ does; their LLG and LLG* may return more than N); their
impact is also divided by the number of local iterations, whose gradients they sum --
here a multi-step update is first read as an average gradient of N samples
(:func:`attacks.label_leakage.last_layer.observed_gradient`), so no such division.
breaching's ``wainakh-simple`` computes the same LLG impact; its stage 2 raises the score
of class C - 1 (stage 1's loop variable) instead of the class just picked, and its
``wainakh-whitebox`` impact sums a dummy batch's row sums over all classes, which is 0
(sum_j (p_kj - y_kj) = 0), so neither is followed here.
"""

from __future__ import annotations

import numpy as np

from attacks.label_leakage.allocation import allocate_greedily
from attacks.label_leakage.last_layer import (DUMMY_OPTIONS, dummy_inputs, observed_gradient,
                                              output_statistics)
from attacks.label_leakage.registry import LabelGuess, register_label_attack
from attacks.update_case import UpdateCase

def two_stages(g: np.ndarray, scores: np.ndarray, impact: float, n: int) -> tuple[
        np.ndarray, tuple[int, ...]]:
    """The paper's two stages: classes with ``g < 0`` first (most negative first, at most
    ``n``), then the greedy allocation on ``scores``, each label raising its class's score
    by ``-impact``.  Returns the counts and stage 1's classes."""
    negative = [int(j) for j in np.argsort(g, kind="stable") if g[j] < 0][:n]
    counts = np.zeros(len(g), dtype=np.int64)
    s = np.array(scores, dtype=np.float64)
    for j in negative:
        counts[j] += 1
        s[j] -= impact
    return allocate_greedily(s, -impact, counts, n), tuple(negative)


@register_label_attack("llg", label="LLG")
def llg(case: UpdateCase) -> LabelGuess:
    """LLG: the impact estimated from the gradient alone (module docstring)."""
    grad = observed_gradient(case)
    g, n, c = grad.row_sums(), grad.num_samples, case.num_classes
    impact = (1.0 + 1.0 / c) * float(g[g < 0].sum()) / n
    counts, first = two_stages(g, g, impact, n)
    return LabelGuess(counts, {"impact": impact, "stage1": first,
                               "gradient": grad.describe()})


@register_label_attack("llg-star", label="LLG*", options=DUMMY_OPTIONS)
def llg_star(case: UpdateCase, *, dummies: int = 64, dummy: str = "uniform",
             seed: int = 0) -> LabelGuess:
    """LLG*: impact and offsets from the start model's outputs on dummy inputs (module
    docstring)."""
    grad = observed_gradient(case)
    g, n, c = grad.row_sums(), grad.num_samples, case.num_classes
    stats = output_statistics(case, case.start, dummy_inputs(case, dummies, dummy, seed))
    p, s = stats.probs, stats.activation_sums[:, None]
    impact = (1.0 + 1.0 / c) / (c * n) * float(((p - 1.0) * s).mean(axis=0).sum())
    offset = (p * s).mean(axis=0)
    counts, first = two_stages(g, g - offset, impact, n)
    return LabelGuess(counts, {"impact": impact, "offset": tuple(offset.tolist()),
                               "stage1": first, "gradient": grad.describe()})
