"""FedMIA (Zhu et al. 2024, "all for one", arXiv 2402.06289): the curious server's
reference-model attack on one client's model of one round, with the round's other clients'
models as free OUT references (docs/algorithms.md section 9)."""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.membership.lira import lira_scores
from attacks.membership.reference_signals import ReferenceSignals, logit_confidence
from attacks.membership.registry import register_attack
from attacks.membership.sequences import as_outcomes, outcome_labels

__all__ = ["fedmia_attack"]


@register_attack("fedmia", label="FedMIA", references=True, server_view=True,
                 data=("image", "text"), order=300)
def fedmia_attack(oracle: Any, x: Any, y: Any, *,
                  references: ReferenceSignals) -> np.ndarray:
    """FedMIA (Zhu et al. 2024, "all for one", arXiv 2402.06289) for one client's model in
    one round: the OTHER clients' models of that round never trained on this client's data,
    so they are free OUT references; the score is LiRA's one-sided offline test with a
    per-sample Gaussian over them (:func:`lira_scores`, ``fixed_variance=False``).  The
    curious server runs it (``attack.targets`` = clients); the combination over rounds is
    in :mod:`fedaudit.audit.targets.client_models`."""
    labels = np.asarray(y)
    target = logit_confidence(*as_outcomes(oracle.predict_proba(x), labels))
    others = logit_confidence(references.probs, outcome_labels(labels))
    return lira_scores(target, others, None, fixed_variance=False)
