"""Extraction of a planted secret by decoding (Carlini et al. 2019, Section 8): the
attacker knows the template's prefix and the secret's format (its length and alphabet) and
decodes from the model; the secret is extracted when the decoded string equals it.

:func:`beam_decode` keeps the ``beam`` most likely partial secrets (lowest log-perplexity)
at each of the ``length`` steps, the next token restricted to the alphabet (the format);
``beam = 1`` is greedy decoding, ``beam = |A|^length`` would be exhaustive.  Ties are
broken by alphabet position (a stable sort), so decoding is deterministic.  A secret is
extracted when it is among the ``beam`` final sequences (the attacker's ``beam`` guesses;
with one template shared by several secrets, at most ``beam`` of them can be).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedaudit.secrets.exposure import _LOG2E, NextLogProbs, _contexts, _next, _prefix, _tokens

__all__ = ["beam_decode"]


def beam_decode(model: NextLogProbs, prefix: Sequence[int], alphabet: Sequence[int],
                length: int, *, beam: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(the final beams' tokens, int64 (min(beam, |A|^length), length), most likely first;
    their log-perplexities in bits)."""
    prefix, alphabet = _prefix(prefix), _tokens(alphabet, "alphabet")
    if length < 1 or beam < 1:
        raise ValueError(f"need length >= 1 and beam >= 1, got {length}, {beam}")
    paths = np.zeros((1, 0), dtype=np.int64)
    px = np.zeros(1)
    a = len(alphabet)
    for _ in range(length):
        step = -_next(model, _contexts(prefix, alphabet, paths))[:, alphabet] * _LOG2E
        total = (px[:, None] + step).ravel()
        keep = np.argsort(total, kind="stable")[:beam]
        paths = np.concatenate([paths[keep // a], (keep % a)[:, None]], axis=1)
        px = total[keep]
    return alphabet[paths], px
