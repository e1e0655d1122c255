"""attacks.label_leakage.baseline against independent references: the data-free guess
against the best of every guess by exhaustive search (expected labels recovered from the
multinomial's enumerated outcomes), and the conditional test's p-values against tails
worked by hand."""

import itertools
import math

import numpy as np
import pytest

from attacks.label_leakage.baseline import (DRAWS, LabelCase, class_prior, data_free_guess,
                                            null_pvalues, overdispersion)


def _outcomes(n, prior):
    """Every count vector of n labels over the classes with its multinomial probability."""
    c = len(prior)
    for cut in itertools.combinations(range(n + c - 1), c - 1):  # stars and bars
        edges = (-1, *cut, n + c - 1)
        t = np.array([edges[i + 1] - edges[i] - 1 for i in range(c)])
        coef = math.factorial(n) / math.prod(math.factorial(int(k)) for k in t)
        yield t, coef * math.prod(p ** int(k) for p, k in zip(prior, t))


def _expected_hits(g, n, prior):
    return sum(w * np.minimum(g, t).sum() for t, w in _outcomes(n, prior))


@pytest.mark.parametrize("n, prior", [
    (1, [0.25] * 4), (4, [0.25] * 4), (5, [0.5, 0.3, 0.2]), (6, [0.7, 0.2, 0.1]),
    (7, [0.1, 0.2, 0.3, 0.4]), (3, [0.9, 0.05, 0.05]), (8, [0.2] * 5)])
def test_the_data_free_guess_is_the_best_guess_that_uses_no_data(n, prior):
    guess = data_free_guess(n, prior)
    assert guess.sum() == n and (guess >= 0).all()
    best = max(_expected_hits(np.array(g), n, prior) for g, _ in _outcomes(n, [1] * len(prior)))
    # sums of at most a few hundred products of probabilities: float64 error ~1e-15
    assert _expected_hits(guess, n, prior) == pytest.approx(best, rel=1e-12)


def test_balanced_classes_get_an_even_spread_and_ties_go_to_the_lower_class():
    assert data_free_guess(4, [0.1] * 10).tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert data_free_guess(25, [0.1] * 10).tolist() == [3] * 5 + [2] * 5
    assert data_free_guess(0, [0.5, 0.5]).tolist() == [0, 0]
    assert class_prior([0, 0, 1, 3], 4).tolist() == [0.5, 0.25, 0.0, 0.25]
    assert class_prior([], 2).tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="probabilities summing to 1"):
        data_free_guess(3, [0.5, 0.6])


#: a Monte Carlo p-value from DRAWS draws lies within 5 standard errors of the true one
def _mc_close(p_hat, p):
    return abs(p_hat - p) <= 5 * math.sqrt(p * (1 - p) / DRAWS) + 1 / DRAWS


def test_p_values_against_tails_worked_by_hand():
    """Three classes, uniform prior.  Client 0 holds {0, 0, 1} and is guessed {0, 1, 1}: it
    recovers h = 2; for labels T ~ Mult(3, 1/3) the same guess recovers h* = [T0 >= 1] +
    min(2, T1), and h* <= 1 exactly for T = (0, 0, 3), (0, 1, 2), (1, 0, 2), (2, 0, 1),
    (3, 0, 0): 1 + 3 + 3 + 3 + 1 = 11 of 27, so P(h* >= 2) = 16/27.  Client 1 holds {2},
    guessed {2}: P(h* >= 1) = 1/3.  Pooled, h* = 3 for client 0 only at T = (1, 2, 0)
    (3/27), so P(h0* + h1* >= 3) = 3/27 + 13/27 * 1/3 = 22/81."""
    prior = np.full(3, 1 / 3)
    cases = [LabelCase(0, np.array([1, 2, 0]), data_free_guess(3, prior), np.array([2, 1, 0])),
             LabelCase(1, np.array([0, 0, 1]), data_free_guess(1, prior), np.array([0, 0, 1]))]
    pooled, per, rho = null_pvalues(cases, prior)
    # X^2 = 2 + 2 = 4 = (C - 1) K: no overdispersion, the prior's multinomial
    assert rho == 0.0
    assert _mc_close(per[0].p_above, 16 / 27) and _mc_close(per[1].p_above, 1 / 3)
    assert _mc_close(pooled.p_above, 22 / 81)
    assert (pooled.labels, per[0].labels, per[1].labels) == (4, 3, 1)
    assert (pooled.samples, per[0].samples) == (4, 3)
    # seeded: the same cases give the same p-values
    assert null_pvalues(cases, prior) == (pooled, per, rho)


def test_the_attacks_hits_are_tested_not_their_excess_over_the_data_free_guess():
    """Four distinct labels guessed exactly, one of which the data-free guess (classes 0-3)
    shares: h = 4 is as rare as T = the truth, 4! / 10^4 = 0.0024; the excess d = 3 is no
    rarer than 3 of the other labels right with none of 0-3 (p about 0.007)."""
    prior = np.full(10, 0.1)
    truth = np.bincount([3, 5, 7, 9], minlength=10)
    _, per, _ = null_pvalues([LabelCase(0, truth.copy(), data_free_guess(4, prior), truth)],
                             prior)
    assert _mc_close(per[0].p_above, 24 / 10**4)


def test_a_clients_interval_is_its_share_less_the_null_spread():
    """Client 1 of the case above: d = [T = 2] - [T = 0] over one label, T uniform on 3
    classes: d* is -1, 0 or 1, each 1/3, mean 0, so the 2.5 % and 97.5 % quantiles of
    d* - mean are -1 and 1 and the interval of its observed share 1 is [0, 2]."""
    prior = np.full(3, 1 / 3)
    cases = [LabelCase(0, np.array([1, 2, 0]), data_free_guess(3, prior), np.array([2, 1, 0])),
             LabelCase(1, np.array([0, 0, 1]), data_free_guess(1, prior), np.array([0, 0, 1]))]
    _, per, _ = null_pvalues(cases, prior)
    lo, hi = per[1].interval(1.0)
    # the draws' mean is 0 up to Monte Carlo error (sd about 0.006)
    assert lo == pytest.approx(0.0, abs=0.03) and hi == pytest.approx(2.0, abs=0.03)


def test_a_clients_rounds_are_one_draw_not_several():
    """Four labels all of class 2 under a uniform prior over 4 classes, found exactly: d = 3
    only when the fresh labels are all 2, P = 4^-4.  Three rounds of the same samples give
    d = 9 with the same probability (one draw), not 4^-12 (three independent draws)."""
    prior = np.full(4, 0.25)
    case = LabelCase(5, np.array([0, 0, 4, 0]), data_free_guess(4, prior), np.array([0, 0, 4, 0]))
    _, one, _ = null_pvalues([case], prior)
    _, three, _ = null_pvalues([case] * 3, prior)
    assert _mc_close(one[5].p_above, 1 / 256) and one[5].p_above == three[5].p_above
    assert (three[5].labels, three[5].samples) == (12, 4)  # 4 samples, attacked thrice
    # one leaking round among rounds that read nothing: its most exposed round decides, the
    # other rounds cost it at most their share of chances to look as extreme (at most 3x)
    quiet = LabelCase(5, data_free_guess(4, prior), data_free_guess(4, prior),
                      np.array([0, 0, 4, 0]))
    _, mixed, _ = null_pvalues([case, quiet, quiet], prior)
    assert one[5].p_above - 0.0025 <= mixed[5].p_above <= 3 * one[5].p_above + 0.0025


def test_overdispersion_by_the_method_of_moments():
    """Dirichlet-multinomial clients with intra-client correlation 1 / (1 + sum a) = 0.2
    (sum a = 4) give about 0.2; multinomial clients about 0 (cut at 0); one client gives 0."""
    prior = np.full(10, 0.1)
    g = np.random.default_rng(0)
    dm = [g.multinomial(50, g.dirichlet(4.0 * prior)) for _ in range(400)]
    assert overdispersion(dm, prior) == pytest.approx(0.2, abs=0.03)
    iid = [g.multinomial(50, prior) for _ in range(400)]
    assert overdispersion(iid, prior) < 0.01
    assert overdispersion(dm[:1], prior) == 0.0


def test_a_skewed_federation_does_not_turn_a_lucky_guess_into_a_leak():
    """Eight clients, each holding one class only (as a very skewed partition does); the
    data-free guess 'all in class 0' matches client 0 exactly.  Under the prior's
    multinomial that is a 10^-8 event (a leak); among clients that each hold one class it
    is an everyday one: the overdispersion the clients show (near 1) keeps it so."""
    prior = np.full(10, 0.1)
    base = data_free_guess(8, prior)
    guess = np.r_[8, np.zeros(9, int)]
    cases = [LabelCase(k, guess, base, np.eye(10, dtype=int)[k % 10] * 8) for k in range(8)]
    pooled, per, rho = null_pvalues(cases, prior)
    assert rho > 0.9
    assert per[0].p_above > 0.05 and pooled.p_above > 0.05


def test_a_guess_that_reads_nothing_is_not_a_leak():
    """The even spread under a uniform prior is the data-free guess itself: d = 0 for every
    update, and its hits are a draw from their own null (p anywhere in [0, 1])."""
    from attacks.label_leakage.family import pooled_labels

    prior = np.full(10, 0.1)
    g = np.random.default_rng(0)
    cases = []
    for k in range(12):
        true = np.bincount(g.integers(0, 10, 8), minlength=10)
        cases.append(LabelCase(k, data_free_guess(8, prior), data_free_guess(8, prior), true))
    out = pooled_labels(cases, prior)
    assert out["difference"] == 0.0 and out["verdict"] != "leaks"
