"""The zlib-ratio attack on sequences (Carlini et al., "Extracting Training Data from
Large Language Models", USENIX Security 2021, section 5.2 "zlib").

A sequence the model finds likely may just be easy text (repetitions, common words); a
memorised one is likely *for the model* beyond what a generic compressor finds
predictable.  Carlini et al. rank samples by the ratio of the model's log-perplexity to
the sample's zlib entropy.  For a sequence s of L + 1 characters c_0..c_L (the input x =
c_0..c_{L-1} and its last target c_L; every c_t, t >= 1, is predicted from c_<t):

    log-perplexity  P(s) = (1/L) sum_{t=1..L} -log p(c_t | c_<t)     (nats per token)
    zlib entropy    Z(s) = 8 len(zlib.compress(utf8(s)))              (bits)
    score           S(s) = -P(s) / Z(s)

(zlib at its default level, 6).  A member has a low perplexity for its compressibility:
its score is the least negative.  P is the negated LOSS score of
:func:`attacks.membership.baselines.loss_scores`; only the normalisation differs, so a text that
compresses well (predictable for anyone) does not pass for a member.  The units (nats vs
bits) only scale every score by one constant, which leaves the ranking and every metric
unchanged.  One query per sequence; text only (the characters come from the data's
vocabulary, ``vocabulary=``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from attacks.membership.baselines import DEFAULT_EPS, loss_scores
from attacks.membership.registry import register_attack

__all__ = ["decode", "zlib_entropy", "zlib_scores", "zlib_attack"]


def decode(x: np.ndarray, y: np.ndarray, vocabulary: Sequence[str]) -> list[str]:
    """The text of each sequence: its input characters then its last target,
    ``vocabulary[x_0] .. vocabulary[x_{L-1}] vocabulary[y_{L-1}]`` (L + 1 characters)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 2 or y.shape != x.shape:
        raise ValueError(f"x and y must be (N, L) token ids of one shape, got {x.shape} and "
                         f"{y.shape}")
    chars = np.asarray(list(vocabulary), dtype=object)
    full = np.concatenate([x, y[:, -1:]], axis=1)
    if full.size and (full.min() < 0 or full.max() >= len(chars)):
        raise ValueError(f"token ids must lie in 0..{len(chars) - 1}")
    return ["".join(row) for row in chars[full]]


def zlib_entropy(text: str) -> int:
    """Z(s) = 8 len(zlib.compress(s.encode("utf-8"))): bits of the zlib-compressed text."""
    return 8 * len(zlib.compress(text.encode("utf-8")))


def zlib_scores(proba: np.ndarray, y: np.ndarray, texts: Sequence[str], *,
                eps: float = DEFAULT_EPS) -> np.ndarray:
    """S = -P / Z for next-token probabilities ``proba`` (N, L, V), targets ``y`` (N, L)
    and each sequence's text (:func:`decode`); P is the mean token NLL (each probability
    floored at ``eps``, as LOSS does)."""
    if np.asarray(proba).ndim != 3:
        raise ValueError(f"proba must be (N, L, V) next-token probabilities, got shape "
                         f"{np.asarray(proba).shape}")
    if len(texts) != len(proba):
        raise ValueError(f"{len(texts)} texts for {len(proba)} sequences")
    z = np.array([zlib_entropy(t) for t in texts], dtype=np.float64)
    return loss_scores(proba, y, eps=eps) / z  # loss_scores = -P


@register_attack("zlib", label="zlib", data=("text",), vocabulary=True, order=400)
def zlib_attack(oracle: Any, x: Any, y: Any, *, vocabulary: Sequence[str],
                eps: float = DEFAULT_EPS) -> np.ndarray:
    """The zlib-ratio attack: S = -log-perplexity / zlib entropy. One query per sequence."""
    texts = decode(np.asarray(x), np.asarray(y), vocabulary)
    return zlib_scores(oracle.predict_proba(x), y, texts, eps=eps)
