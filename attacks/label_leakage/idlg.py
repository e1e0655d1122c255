"""``idlg``: the label of a one-sample update from the sign of the last layer's gradient
(Zhao, Mopuri, Bilen 2020, "iDLG: Improved Deep Leakage from Gradients", arXiv:2001.02610,
section 3.1).

For one sample with label y and cross-entropy over softmax p = softmax(z), z = W h + b:

    dL/dz_j = p_j - [j = y]        dL/dW_j = (p_j - [j = y]) h

so when the last layer's input is non-negative (h >= 0: a ReLU, or a one-layer model on
non-negative pixels) every entry of row y is <= 0 and every other row's are >= 0: the label
is the row whose gradient is negative.  Read here as the row with the lowest sum
``g_j = sum_d dL/dW_jd`` (exactly one row sum is negative when h >= 0, h != 0 and p_y < 1;
``info["negative_rows"]`` says how many were, so a broken assumption shows).  The bias row
would say the same without the sign assumption on h; the paper reads the weights, and so
does this attack.
"""

from __future__ import annotations

import numpy as np

from attacks.label_leakage.last_layer import observed_gradient
from attacks.label_leakage.registry import LabelGuess, register_label_attack
from attacks.update_case import UpdateCase


@register_label_attack("idlg", label="iDLG")
def idlg(case: UpdateCase) -> LabelGuess:
    """The label of a one-sample, one-SGD-step update (module docstring); ``ValueError``
    for any other case."""
    t = case.training
    if t.num_examples != 1:
        raise ValueError(f"idlg reads a one-sample update; this client trained on "
                         f"{t.num_examples} samples (use a batch label attack)")
    if not case.single_gradient():
        raise ValueError(f"idlg reads a single gradient; this update is {t.steps} "
                         f"{t.optimizer} steps")
    rows = observed_gradient(case).row_sums()
    label = int(np.argmin(rows))
    counts = np.zeros(case.num_classes, dtype=np.int64)
    counts[label] = 1
    return LabelGuess(counts, {"negative_rows": int((rows < 0).sum())})
