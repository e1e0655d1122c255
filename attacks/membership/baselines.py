"""Baseline black-box membership-inference scores (docs/algorithms.md section 4).

All scores are computed from the probability vector ``p = f(x)`` returned by the oracle and
the true label ``y``, and oriented so that higher means "more likely a member":

    loss        -CE(p, y) = log p_y                      (Yeom et al. 2018)
    confidence  p_y
    entropy     -H(p) = sum_i p_i log p_i                (Salem et al. 2019)
    mentropy    -Mentr(p, y), where                      (Song & Mittal 2021, "Systematic
                Mentr = -(1 - p_y) log p_y                Evaluation of Privacy Risks of
                        - sum_{i != y} p_i log(1 - p_i)   Machine Learning Models")

Numerics: a probability can be exactly 0 (softmax underflow) or exactly 1, and ``log 0``
is ``-inf``. Every logarithm is taken of ``max(z, eps)`` (``z`` = ``p_y``, ``p_i`` or
``1 - p_i``), with ``eps = 1e-30`` by default as in Song & Mittal's reference code; the
weights in front of the logarithms are the raw probabilities, so a class of probability 0
contributes exactly 0 to the entropy. Scores are thus finite, e.g. the loss score of a
sample with ``p_y = 0`` is ``log(eps)`` (about -69.1).

**Sequences** (a model of token sequences: ``p`` (N, L, V), the next-token distribution
at each of the L positions, ``y`` (N, L) the targets): each score is computed per token
as above and averaged over the sequence's L tokens, so LOSS is minus the mean token NLL,
-(1/L) sum_t -log p_t[y_t] (the loss the model trained on; Yeom et al.'s attack on a
sequence, as in Carlini et al. 2021's perplexity baseline), confidence the mean target
probability, entropy and m-entropy the mean per-token (modified) entropy.  Image scores
are computed exactly as before (no reshaping, bit-identical).

The ``*_scores`` functions are pure (probabilities in, scores out); the registered attacks
query the oracle once per sample and apply them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from attacks.membership.oracle import Oracle
from attacks.membership.registry import register_attack

__all__ = [
    "DEFAULT_EPS",
    "loss_scores",
    "confidence_scores",
    "entropy_scores",
    "mentropy_scores",
    "loss_attack",
    "confidence_attack",
    "entropy_attack",
    "mentropy_attack",
]

DEFAULT_EPS = 1e-30


def _per_token(score: Callable[..., np.ndarray], proba: ArrayLike, y: ArrayLike | None,
               **kw: Any) -> np.ndarray | None:
    """For sequences (``proba`` (N, L, V)): ``score`` of every token, (N L,), averaged
    over each sequence's L tokens, (N,); None for (N, C) class probabilities."""
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 3:
        return None
    n, length, v = p.shape
    if y is None:
        return score(p.reshape(n * length, v), **kw).reshape(n, length).mean(axis=1)
    t = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if t.shape != (n, length):
        raise ValueError(f"y must be ({n}, {length}) next-token targets for proba of shape "
                         f"{p.shape}, got shape {t.shape}")
    return score(p.reshape(n * length, v), t.reshape(n * length), **kw
                 ).reshape(n, length).mean(axis=1)


def _check_proba(proba: ArrayLike) -> np.ndarray:
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"proba must be 2-D (samples, classes) or 3-D (sequences, "
                         f"positions, vocabulary), got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("proba must be finite")
    if p.size and (p.min() < 0.0 or p.max() > 1.0):
        raise ValueError("proba must lie in [0, 1]")
    return p


def _check_labels(y: ArrayLike, proba: np.ndarray) -> np.ndarray:
    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != proba.shape[0]:
        raise ValueError(
            f"y must be 1-D with one label per sample ({proba.shape[0]}), got shape {labels.shape}"
        )
    if labels.size and labels.dtype.kind not in "iu":
        raise ValueError(f"y must hold integer class labels, got dtype {labels.dtype}")
    labels = labels.astype(np.int64, copy=False)
    if labels.size and (labels.min() < 0 or labels.max() >= proba.shape[1]):
        raise ValueError(
            f"y must lie in [0, {proba.shape[1] - 1}], got values in "
            f"[{labels.min()}, {labels.max()}]"
        )
    return labels


def _check_eps(eps: float) -> float:
    e = float(eps)
    if not 0.0 < e < 1.0:
        raise ValueError(f"eps must lie in (0, 1), got {eps!r}")
    return e


def _log(z: np.ndarray, eps: float) -> np.ndarray:
    return np.log(np.maximum(z, eps))


def loss_scores(proba: ArrayLike, y: ArrayLike, *, eps: float = DEFAULT_EPS) -> np.ndarray:
    """``-CE(p, y) = log max(p_y, eps)``; sequences: its mean over the tokens."""
    if (seq := _per_token(loss_scores, proba, y, eps=eps)) is not None:
        return seq
    p = _check_proba(proba)
    labels = _check_labels(y, p)
    return _log(p[np.arange(p.shape[0]), labels], _check_eps(eps))


def confidence_scores(proba: ArrayLike, y: ArrayLike) -> np.ndarray:
    """``p_y``; sequences: its mean over the tokens."""
    if (seq := _per_token(confidence_scores, proba, y)) is not None:
        return seq
    p = _check_proba(proba)
    labels = _check_labels(y, p)
    return p[np.arange(p.shape[0]), labels].copy()


def entropy_scores(proba: ArrayLike, *, eps: float = DEFAULT_EPS) -> np.ndarray:
    """``-H(p) = sum_i p_i log max(p_i, eps)`` (label-free); sequences: its mean over
    the positions."""
    if (seq := _per_token(entropy_scores, proba, None, eps=eps)) is not None:
        return seq
    p = _check_proba(proba)
    return np.sum(p * _log(p, _check_eps(eps)), axis=1)


def mentropy_scores(proba: ArrayLike, y: ArrayLike, *, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Negated modified entropy (Song & Mittal 2021)::

        -Mentr(p, y) = (1 - p_y) log p_y + sum_{i != y} p_i log(1 - p_i)

    (logarithms of ``max(., eps)``). Mentr is 0 for a confident correct prediction and
    grows both with uncertainty and with confident mistakes, unlike the plain entropy.
    Sequences: its mean over the tokens.
    """
    if (seq := _per_token(mentropy_scores, proba, y, eps=eps)) is not None:
        return seq
    p = _check_proba(proba)
    labels = _check_labels(y, p)
    e = _check_eps(eps)
    rows = np.arange(p.shape[0])
    p_y = p[rows, labels]
    others = p * _log(1.0 - p, e)
    others[rows, labels] = 0.0
    return (1.0 - p_y) * _log(p_y, e) + others.sum(axis=1)


@register_attack("loss", label="LOSS", data=("image", "text"), order=200)
def loss_attack(oracle: Oracle, x: Any, y: ArrayLike, *, eps: float = DEFAULT_EPS) -> np.ndarray:
    """LOSS attack: score = ``-CE(f(x), y)``. One query per sample."""
    return loss_scores(oracle.predict_proba(x), y, eps=eps)


@register_attack("confidence", label="confidence", data=("image", "text"), order=200)
def confidence_attack(oracle: Oracle, x: Any, y: ArrayLike) -> np.ndarray:
    """Confidence attack: score = ``f_y(x)``. One query per sample."""
    return confidence_scores(oracle.predict_proba(x), y)


@register_attack("entropy", label="entropy", data=("image", "text"), order=200)
def entropy_attack(
    oracle: Oracle, x: Any, y: ArrayLike, *, eps: float = DEFAULT_EPS
) -> np.ndarray:
    """Entropy attack: score = ``-H(f(x))``; ``y`` is unused. One query per sample."""
    return entropy_scores(oracle.predict_proba(x), eps=eps)


@register_attack("mentropy", label="m-entropy", data=("image", "text"), order=200)
def mentropy_attack(
    oracle: Oracle, x: Any, y: ArrayLike, *, eps: float = DEFAULT_EPS
) -> np.ndarray:
    """Modified-entropy attack (Song & Mittal 2021). One query per sample."""
    return mentropy_scores(oracle.predict_proba(x), y, eps=eps)
