"""Exposure of a planted secret (N. Carlini, C. Liu, U. Erlingsson, J. Kos, D. Song, "The
Secret Sharer: Evaluating and Testing Unintended Memorization in Neural Networks", USENIX
Security 2019, Section 4).

A canary is a template with a random secret r from a candidate space R (for example six
digits: |R| = 10^6) put after a fixed prefix.  With the model's log-perplexity of a
candidate (bits; natural-log probabilities from the model, converted)

    Px(r) = - sum_i log2 Pr(r_i | prefix, r_1 .. r_{i-1}),

the rank of the secret is its position among all candidates ordered by Px, ties counted
against it (the paper's definition),

    rank(r) = |{ r' in R : Px(r') <= Px(r) }|        (1 = the most likely candidate),

and its exposure

    exposure(r) = log2 |R| - log2 rank(r)            (0 .. log2 |R| bits).

A model that never saw the secret ranks it uniformly at random (expected exposure about
1.44 bits = 1 / ln 2); a fully memorised secret has rank 1 and exposure log2 |R|.

Two ways to get it: exact enumeration of every candidate (:func:`candidate_log_perplexities`,
a tree walk of |R|'s prefixes: |A|^0 + ... + |A|^(L-1) model calls for an alphabet A and
length L, batched), or the paper's extrapolation (Section 4.3) from a sample of candidates:
fit a skew-normal distribution to their log-perplexities and read

    exposure ~ - log2 F(Px(r)),      F the fitted CDF,

(:func:`exposure_extrapolated`), which can exceed what the sample could rank exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["NextLogProbs", "candidate_index", "candidate_log_perplexities", "candidate_tokens",
           "exposure", "exposure_extrapolated", "log_perplexities", "rank"]

#: the model as the secrets see it: token contexts (B, T) int64 -> natural-log
#: probabilities (B, V) of the next token after each context
NextLogProbs = Callable[[np.ndarray], np.ndarray]

_LOG2E = 1.0 / math.log(2.0)


def _tokens(seq: Sequence[int] | np.ndarray, what: str) -> np.ndarray:
    a = np.asarray(seq)
    if a.ndim != 1 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{what} must be a 1-D sequence of token ids, got shape {a.shape} "
                         f"dtype {a.dtype}")
    return a.astype(np.int64)


def _prefix(prefix: Sequence[int] | np.ndarray) -> np.ndarray:
    p = _tokens(prefix, "prefix")
    if len(p) == 0:
        raise ValueError("prefix must hold at least one token")
    return p


def _contexts(prefix: np.ndarray, alphabet: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """prefix + the tokens of each row of ``paths`` (alphabet positions): (len(paths),
    len(prefix) + paths.shape[1]) contexts of a tree walk over the candidates."""
    return np.concatenate([np.broadcast_to(prefix, (len(paths), len(prefix))),
                           alphabet[paths]], axis=1)


def candidate_tokens(codes: np.ndarray, alphabet: Sequence[int] | np.ndarray,
                     length: int) -> np.ndarray:
    """The tokens (n, length) of candidates by index: index c is read as a base-|A|
    number of ``length`` digits, most significant first, each digit an alphabet position
    (the order of :func:`candidate_log_perplexities`)."""
    alphabet = _tokens(alphabet, "alphabet")
    a, codes = len(alphabet), np.asarray(codes, dtype=np.int64)
    digits = np.stack([(codes // a ** p) % a for p in range(length - 1, -1, -1)], axis=-1)
    return alphabet[digits.reshape(len(codes), length)]


def candidate_index(tokens: np.ndarray, alphabet: Sequence[int] | np.ndarray) -> np.ndarray:
    """The inverse of :func:`candidate_tokens`: each row of ``tokens`` (n, L), all from
    ``alphabet``, as its candidate index."""
    alphabet = _tokens(alphabet, "alphabet")
    tokens = np.asarray(tokens, dtype=np.int64)
    digits = np.argsort(alphabet)[np.searchsorted(np.sort(alphabet), tokens)]
    return (digits * len(alphabet) ** np.arange(tokens.shape[1] - 1, -1, -1)).sum(axis=1)


def _next(model: NextLogProbs, contexts: np.ndarray) -> np.ndarray:
    out = np.asarray(model(contexts), dtype=np.float64)
    if out.ndim != 2 or out.shape[0] != contexts.shape[0]:
        raise ValueError(f"the model returned shape {out.shape} for {contexts.shape[0]} "
                         "contexts; expected (contexts, vocabulary)")
    return out


def log_perplexities(model: NextLogProbs, prefix: Sequence[int], secrets: np.ndarray, *,
                     batch_size: int = 4096) -> np.ndarray:
    """Px (bits) of each row of ``secrets`` (S, L) after ``prefix``: L batched model calls
    (position i: the contexts prefix + secret[:i] of every secret)."""
    prefix = _prefix(prefix)
    secrets = np.asarray(secrets, dtype=np.int64)
    if secrets.ndim != 2:
        raise ValueError(f"secrets must be (S, L) token ids, got shape {secrets.shape}")
    seq = np.concatenate([np.broadcast_to(prefix, (len(secrets), len(prefix))), secrets], 1)
    bits = np.zeros(len(secrets))
    for i in range(secrets.shape[1]):
        for b in range(0, len(secrets), batch_size):
            logp = _next(model, seq[b:b + batch_size, :len(prefix) + i])
            bits[b:b + batch_size] -= logp[np.arange(len(logp)), secrets[b:b + batch_size, i]]
    return bits * _LOG2E


def candidate_log_perplexities(model: NextLogProbs, prefix: Sequence[int],
                               alphabet: Sequence[int], length: int, *,
                               batch_size: int = 4096) -> np.ndarray:
    """Px (bits) of every candidate secret of ``length`` tokens from ``alphabet`` after
    ``prefix``, float64 of length |A|^length in lexicographic order of the alphabet's
    positions (candidate index = the secret read as a base-|A| number).  Exact: depth d
    of the tree costs |A|^d contexts, so |A|^0 + ... + |A|^(length-1) in all."""
    prefix, alphabet = _prefix(prefix), _tokens(alphabet, "alphabet")
    if length < 1 or len(alphabet) < 1 or len(np.unique(alphabet)) != len(alphabet):
        raise ValueError("need length >= 1 and an alphabet of distinct tokens")
    a = len(alphabet)
    paths = np.zeros((1, 0), dtype=np.int64)  # alphabet positions of each prefix so far
    px = np.zeros(1)
    for _ in range(length):
        contexts = _contexts(prefix, alphabet, paths)
        logp = np.concatenate([_next(model, contexts[i:i + batch_size])
                               for i in range(0, len(contexts), batch_size)])
        step = -logp[:, alphabet] * _LOG2E  # (paths, a)
        px = (px[:, None] + step).ravel()
        paths = np.concatenate([np.repeat(paths, a, axis=0),
                                np.tile(np.arange(a), len(paths))[:, None]], axis=1)
    return px


def rank(secret_px: float | np.ndarray, candidates_px: np.ndarray) -> np.ndarray | int:
    """rank = |{candidates with Px <= the secret's}| (``candidates_px`` holds every
    candidate, the secret included, so the rank is >= 1 for a secret among them)."""
    cand = np.sort(np.asarray(candidates_px, dtype=np.float64))
    if cand.ndim != 1 or len(cand) == 0 or not np.all(np.isfinite(cand)):
        raise ValueError("candidates_px must be a non-empty 1-D array of finite values")
    s = np.asarray(secret_px, dtype=np.float64)
    out = np.searchsorted(cand, s, side="right")
    return int(out) if out.ndim == 0 else out


def exposure(secret_px: float | np.ndarray, candidates_px: np.ndarray) -> np.ndarray | float:
    """log2 |R| - log2 rank, |R| = len(candidates_px) (every candidate enumerated)."""
    r = np.maximum(np.asarray(rank(secret_px, candidates_px), dtype=np.float64), 1.0)
    out = math.log2(len(candidates_px)) - np.log2(r)
    return float(out) if np.ndim(out) == 0 else out


def exposure_extrapolated(secret_px: float | np.ndarray,
                          sample_px: np.ndarray) -> np.ndarray | float:
    """- log2 F(Px), F the CDF of a skew-normal fitted (``scipy.stats.skewnorm.fit``, maximum
    likelihood) to the log-perplexities ``sample_px`` of candidates drawn uniformly from R
    (the paper's Section 4.3); log-CDF, so a far tail stays finite."""
    from scipy.stats import skewnorm

    sample = np.asarray(sample_px, dtype=np.float64)
    if sample.ndim != 1 or len(sample) < 10 or not np.all(np.isfinite(sample)):
        raise ValueError("sample_px must hold at least 10 finite log-perplexities")
    shape, loc, scale = skewnorm.fit(sample)
    out = -skewnorm.logcdf(np.asarray(secret_px, dtype=np.float64), shape, loc, scale) * _LOG2E
    return float(out) if np.ndim(out) == 0 else out
