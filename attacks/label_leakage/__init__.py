"""The label-leakage family: which labels did a client train on this round, read from its
update?

An attack of this family gets one client's round as the server holds it (an
:class:`attacks.update_case.UpdateCase`) and returns a :class:`LabelGuess`, the multiset of
labels as one count per class (``fn(case, **options)``, registered in
:data:`LABEL_ATTACKS` with :func:`register_label_attack`).  It never sees the true labels;
:func:`label_accuracy` and :func:`count_error` compare a guess with them.

* :mod:`~attacks.label_leakage.registry`: the registry, :class:`LabelGuess`, the metrics;
* :mod:`~attacks.label_leakage.last_layer`: the last layer's gradient behind an update
  (exact for one SGD step, a step average for several) and the model's outputs on dummy
  inputs; :mod:`~attacks.label_leakage.allocation`: from scores to integer counts;
* the attacks, one module each: :mod:`~attacks.label_leakage.idlg` (iDLG, one sample),
  :mod:`~attacks.label_leakage.llg` (Wainakh et al.'s LLG and LLG*),
  :mod:`~attacks.label_leakage.analytic_counts` (Geng et al.'s counts from the weights,
  and from the bias).

docs/algorithms.md section 13 gives the formulas, assumptions and measured accuracies.
Importing the package imports every public module in it, so each attack registers itself.
"""

from __future__ import annotations

from attacks.label_leakage.registry import (LABEL_ATTACKS, LabelGuess, count_error,
                                            get_label_attack, label_accuracy,
                                            label_attack_names, label_counts,
                                            register_label_attack)
from fedaudit.registry import import_submodules

__all__ = ["LABEL_ATTACKS", "LabelGuess", "count_error", "get_label_attack",
           "label_accuracy", "label_attack_names", "label_counts", "register_label_attack"]

import_submodules(__name__, __path__)
LABEL_ATTACKS.mark_builtin()
