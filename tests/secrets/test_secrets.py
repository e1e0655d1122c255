"""Exposure and extraction of planted secrets (fedaudit.secrets) on hand-made models whose
next-token probabilities are an explicit table, against hand-computed ranks and an
independent enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fedaudit.secrets import (beam_decode, candidate_log_perplexities, exposure,
                              exposure_extrapolated, log_perplexities, rank)

V = 6  # vocabulary 0..5; the secrets' alphabet is (1, 3, 4)
ALPHABET = (1, 3, 4)


def _table(seed: int = 0) -> np.ndarray:
    """Next-token probabilities by (context length mod 5, last token): (5, V, V)."""
    p = np.random.default_rng(seed).random((5, V, V)) + 0.05
    return p / p.sum(axis=2, keepdims=True)


class TableModel:
    """The model's next-token distribution after a context: TABLE[len % 5, last]."""

    def __init__(self, table: np.ndarray) -> None:
        self.table, self.calls = table, 0

    def __call__(self, contexts: np.ndarray) -> np.ndarray:
        self.calls += len(contexts)
        return np.log(self.table[contexts.shape[1] % 5, contexts[:, -1]])


def _px_by_hand(table: np.ndarray, prefix: tuple, secret: tuple) -> float:
    seq, bits = list(prefix), 0.0
    for tok in secret:
        bits -= math.log2(table[len(seq) % 5, seq[-1], tok])
        seq.append(tok)
    return bits


def test_rank_and_exposure_by_hand():
    cands = np.array([1.0, 2.0, 2.0, 3.0])
    # ties count against the secret: Px 2 has rank 3 (1.0, 2.0, 2.0 are <= 2)
    assert rank(2.0, cands) == 3 and rank(1.0, cands) == 1 and rank(3.0, cands) == 4
    assert exposure(1.0, cands) == 2.0  # log2 4 - log2 1
    assert exposure(2.0, cands) == pytest.approx(2 - math.log2(3), abs=1e-15)
    assert exposure(3.0, cands) == 0.0
    assert exposure(np.array([1.0, 3.0]), cands).tolist() == [2.0, 0.0]
    with pytest.raises(ValueError, match="non-empty 1-D"):
        rank(1.0, np.array([]))


def test_enumeration_equals_the_table_candidate_by_candidate():
    table, prefix = _table(), (2, 5, 0)
    model = TableModel(table)
    px = candidate_log_perplexities(model, prefix, ALPHABET, 4)
    want = [_px_by_hand(table, prefix, s) for s in itertools.product(ALPHABET, repeat=4)]
    # float64: 4 terms of log2 each within an ulp; sums to ~10 bits: 1e-13 is 100 ulps
    assert px.shape == (81,) and np.allclose(px, want, rtol=0, atol=1e-13)
    assert model.calls == 1 + 3 + 9 + 27  # the tree: |A|^0 + ... + |A|^(L-1) contexts
    some = np.array([(1, 1, 1, 1), (4, 3, 1, 4), (3, 3, 4, 1)])
    for b in (1, 4096):  # batched by position, in batches of b secrets
        assert np.allclose(log_perplexities(model, prefix, some, batch_size=b),
                           [_px_by_hand(table, prefix, tuple(s)) for s in some],
                           rtol=0, atol=1e-13)
    # small batches give the same numbers
    assert np.array_equal(candidate_log_perplexities(TableModel(table), prefix, ALPHABET, 4,
                                                     batch_size=2), px)


def test_a_memorised_secret_has_full_exposure():
    table, prefix = _table(1), (2,)
    secret = (3, 4, 1)
    t = table.copy()  # memorise: after the prefix, the secret's tokens get probability 0.99
    seq = list(prefix)
    for tok in secret:
        row = np.full(V, 0.01 / (V - 1))
        row[tok] = 0.99
        t[len(seq) % 5, seq[-1]] = row
        seq.append(tok)
    px = candidate_log_perplexities(TableModel(t), prefix, ALPHABET, 3)
    idx = int(np.ravel_multi_index([ALPHABET.index(s) for s in secret], (3, 3, 3)))
    assert exposure(px[idx], px) == pytest.approx(math.log2(27), abs=1e-15)
    # a model that never saw a secret: the exposure of its candidates, rank by rank
    px = candidate_log_perplexities(TableModel(table), prefix, ALPHABET, 3)
    ranks = [sum(1 for q in px if q <= p) for p in px]
    assert np.allclose(exposure(px, px), [math.log2(27) - math.log2(r) for r in ranks],
                       rtol=0, atol=1e-15)


def test_extrapolated_exposure_matches_the_true_tail():
    """A normal sample (a skew-normal of shape 0): -log2 F(Px) of the fit against the true
    normal tail.  n = 20,000: the fit's location and scale errors are ~0.014 and ~0.01,
    which move z = -3 by ~0.02 and -log2 Phi(z) there by ~0.1 bit (its slope is about 4.7
    bits per unit of z); 0.5 bit is five of those."""
    from scipy.stats import norm

    sample = np.random.default_rng(0).normal(10.0, 2.0, 20_000)
    got = exposure_extrapolated(4.0, sample)
    assert got == pytest.approx(-math.log2(norm.cdf(-3.0)), abs=0.5)
    with pytest.raises(ValueError, match="at least 10"):
        exposure_extrapolated(1.0, sample[:5])


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log")
def test_beam_decoding_recovers_what_greedy_misses():
    """After the prefix, token 1 is likelier than 3 (0.6 vs 0.4) but leads to a flat next
    step; 3 leads to a sure one: greedy picks 1 (Px 1.32 bits with 0.5), beam 2 finds 3 4."""
    t = np.full((5, V, V), 1.0 / V)  # zeros below: log 0 = -inf, never chosen
    t[1, 2] = [0, 0.6, 0, 0.4, 0, 0]  # after prefix (2,): context length 1
    t[2, 1] = [0, 0.5, 0, 0.0, 0.5, 0]  # after 2 1
    t[2, 3] = [0, 0.0, 0, 0.0, 1.0, 0]  # after 2 3
    (greedy,), (px_g,) = beam_decode(TableModel(t), (2,), ALPHABET, 2)
    assert greedy.tolist() == [1, 1] and px_g == pytest.approx(-math.log2(0.6 * 0.5))
    beams, px_b = beam_decode(TableModel(t), (2,), ALPHABET, 2, beam=2)
    assert beams.tolist() == [[3, 4], [1, 1]]  # 0.4 > 0.3 (1 4 ties 1 1 at 0.3: position)
    assert px_b == pytest.approx([-math.log2(0.4), -math.log2(0.3)])
    # an exhaustive beam is the enumeration's minimum
    px = candidate_log_perplexities(TableModel(_table()), (0, 5), ALPHABET, 3)
    got, bits = beam_decode(TableModel(_table()), (0, 5), ALPHABET, 3, beam=27)
    assert got.shape == (27, 3) and np.allclose(bits, np.sort(px), rtol=0, atol=1e-13)
    assert int(np.ravel_multi_index([ALPHABET.index(s) for s in got[0]], (3, 3, 3))) == \
        int(np.argmin(px))


def test_candidate_index_and_tokens_follow_the_enumeration_order():
    from fedaudit.secrets import candidate_index, candidate_tokens

    alphabet = (4, 1, 3)  # unsorted on purpose: positions, not token values, are digits
    every = np.array(list(itertools.product(alphabet, repeat=3)))  # the enumeration's order
    assert np.array_equal(candidate_tokens(np.arange(27), alphabet, 3), every)
    assert candidate_index(every, alphabet).tolist() == list(range(27))
    px = candidate_log_perplexities(TableModel(_table()), (0, 5), alphabet, 3)
    want = [_px_by_hand(_table(), (0, 5), tuple(s)) for s in every]
    assert np.allclose(px, want, rtol=0, atol=1e-13)
