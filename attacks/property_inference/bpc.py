"""Melis et al.'s batch property classifier (BPC).

L. Melis, C. Song, E. De Cristofaro, V. Shmatikov, "Exploiting Unintended Feature Leakage
in Collaborative Learning", IEEE S&P 2019, section V-B (passive property inference): the
adversary computes updates on batches of its auxiliary data with and without the
property, trains a binary classifier on them, and applies it to the observed updates.
The paper's classifier is a random forest or logistic regression on the updates; here a
logistic regression (scikit-learn, L2, ``C``) on the standardised features (each feature
centred and scaled by the auxiliary updates' mean and standard deviation, so no coordinate
dominates by its scale), and the score is its probability of the property.  FederatedScope
implements the same attack (its ``PassivePIA``).
"""

from __future__ import annotations

import numpy as np

from attacks.property_inference.registry import AuxiliaryUpdates, register_property_attack
from fedaudit.options import option


@register_property_attack("bpc", label="BPC (Melis et al.)", options={
    "c": option(float, 1.0, "inverse L2 regularisation strength of the logistic regression",
                min=0.0, min_exclusive=True)})
def batch_property_classifier(aux: AuxiliaryUpdates, *, c: float = 1.0) -> float:
    """P(property | the client's update) from a logistic regression fit on ``aux``."""
    from sklearn.linear_model import LogisticRegression

    mean = aux.features.mean(axis=0)
    sd = aux.features.std(axis=0)
    sd[sd == 0] = 1.0  # a constant feature carries nothing: left at 0 after centring
    clf = LogisticRegression(C=c, max_iter=2000)
    clf.fit((aux.features - mean) / sd, aux.labels)
    return float(clf.predict_proba(((aux.target - mean) / sd)[None])[0, 1])
