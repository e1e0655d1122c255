"""What a server knows of a client's labels without its update, and whether a label attack
beats it (docs/algorithms.md section 13).

**The data-free guess.**  Without the update the server knows the reply's ``num_examples``
``n`` and the class prior ``pi`` of its auxiliary data.  If the client's labels were ``n``
draws from ``pi``, ``T ~ Multinomial(n, pi)``, a guess ``g`` (counts per class, summing to
``n``) would recover ``E[sum_c min(g_c, T_c)] = sum_c sum_{k=1..g_c} P(T_c >= k)`` labels,
``T_c ~ Binomial(n, pi_c)``: a sum over classes of concave functions of ``g_c``, so the
greedy allocation -- one label at a time to the class whose next count adds the most,
``P(T_c >= g_c + 1)``, ties to the lower class -- maximises it (:func:`data_free_guess`).
It is the best guess that uses no data; a uniform *random* guess (the chance level before
issue 57) recovers less, and an even spread of ``n`` over ``C`` balanced classes is this
guess.  Its labels recovered on the client's true labels are the family's chance level.

**The effect** is paired: per update ``u`` of client ``k``, the attack's labels recovered
``h_u`` and the data-free guess's ``b_u`` on the same true labels, ``d_u = h_u - b_u``
(the family's figure, interval and "no leak beyond delta" are of it).

**The test** (:func:`null_pvalues`).  Under the null the attack knows nothing of the
client's labels: they are independent of its guess.  Conditional on the guesses, what the
attack recovered is referred to its distribution when the true labels are drawn afresh --
one draw per client, shared by its rounds when its samples are the same in each, so that a
client's rounds are one unit, not several -- from :data:`DRAWS` seeded draws:

* per client, its most exposed round: each round's tail ``t_r = #{h*_r >= h_r} / DRAWS``,
  the same for each draw, ``t*_r(b) = #{h*_r >= h*_r(b)} / DRAWS``, and the client's
  ``p = (1 + #{b : min_r t*_r(b) <= min_r t_r}) / (DRAWS + 1)`` (a max-statistic test:
  exact for the rounds' dependence, which the shared draws carry; one round is the usual
  ``(1 + #{h* >= h}) / (DRAWS + 1)``; a round that leaks is a leak whatever the others,
  where a sum over the rounds would dilute it);
* pooled, the labels recovered over every update, ``H = sum_u h_u``:
  ``p = (1 + #{H* >= H}) / (DRAWS + 1)``.  (Testing ``sum_u d_u`` instead adds the data-free guess's own luck to
the null: a guess of 4 labels exactly right, one of which the data-free guess shares, is
then no rarer than guessing the other 3 -- p 0.007 where ``H`` gives 0.001.)  A client's
interval (one client holds no replication to estimate one from) is the shift model's: its
share ``sum_u d_u / sum_u n_u`` minus the spread of the null draws of ``sum_u d_u``
(:meth:`NullTest.interval`), wide for a client of 4 labels, narrow for one of 500: "no leak
beyond delta" must hold for each client too.

The fresh labels are those of a client like the federation's: Dirichlet-multinomial,
``T ~ Multinomial(n, p)``, ``p ~ Dirichlet((1 / rho - 1) pi)``, with the prior as mean and
the clients' own overdispersion ``rho`` (:func:`overdispersion`: the intra-client
correlation of the labels by the method of moments, from every attacked client's counts;
0 -- the prior's multinomial -- in an IID federation).  With the multinomial alone a
data-free guess that happens to match one skewed (non-IID) client's classes looks like a
leak: 47 % of null federations of 8 Dirichlet(0.5) clients of 8 samples were called
leaking by an all-one-class guess (docs/validation.md section 24).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["DRAWS", "LabelCase", "NullTest", "class_prior", "data_free_guess",
           "null_pvalues", "overdispersion"]

#: seeded draws of the conditional null (the smallest p-value is 1 / 20,000)
DRAWS = 19_999
#: the null draws' seed (the same cases give the same p-values on any machine)
SEED = 57


def class_prior(labels: ArrayLike, num_classes: int) -> np.ndarray:
    """The class frequencies of ``labels`` (the server's auxiliary data), uniform when
    there are none."""
    y = np.asarray(labels, dtype=np.int64)
    counts = np.bincount(y, minlength=num_classes).astype(np.float64)
    if len(counts) != num_classes:
        raise ValueError(f"labels hold class {int(y.max())}; num_classes = {num_classes}")
    return counts / counts.sum() if counts.sum() else np.full(num_classes, 1.0 / num_classes)


def _check_prior(prior: ArrayLike) -> np.ndarray:
    p = np.asarray(prior, dtype=np.float64)
    if p.ndim != 1 or not len(p) or not np.isfinite(p).all() or (p < 0).any() \
            or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError("prior must be a 1-d array of probabilities summing to 1")
    return p


def data_free_guess(n: int, prior: ArrayLike) -> np.ndarray:
    """The counts the best data-free guess of ``n`` labels gives each class under
    ``prior`` (module docstring: the greedy allocation by ``P(Binomial(n, pi_c) >= g_c +
    1)``, ties to the lower class)."""
    from scipy.stats import binom

    p = _check_prior(prior)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n = {n!r}: must be an integer >= 0")
    n = int(n)
    # tail[c, k] = P(T_c >= k + 1), k = 0..n-1: the gain of the (k+1)-th label in class c
    tail = binom.sf(np.arange(n)[None, :], n, p[:, None])
    counts = np.zeros(len(p), dtype=np.int64)
    for _ in range(n):
        gain = tail[np.arange(len(p)), np.minimum(counts, n - 1)]
        gain[counts >= n] = -1.0
        counts[int(np.argmax(gain))] += 1  # argmax: the first of equal gains
    return counts


@dataclass(frozen=True)
class LabelCase:
    """One attacked update: its ``client`` (its unit of independence), the attack's guess
    and the data-free guess (counts per class) and the true counts."""

    client: int
    guess: np.ndarray
    baseline: np.ndarray
    true: np.ndarray

    @property
    def hits(self) -> int:
        """``h``: the attack's labels recovered."""
        return int(np.minimum(self.guess, self.true).sum())

    @property
    def difference(self) -> int:
        """``d = h - b``: the attack's labels recovered minus the data-free guess's."""
        return int(np.minimum(self.guess, self.true).sum()
                   - np.minimum(self.baseline, self.true).sum())


def overdispersion(counts: Sequence[np.ndarray], prior: ArrayLike) -> float:
    """The intra-client correlation ``rho`` of the clients' labels around ``prior``, by the
    method of moments: with ``X^2 = sum_k sum_c (T_kc - n_k pi_c)^2 / (n_k pi_c)`` (classes
    with ``pi_c > 0``), ``E[X^2] = (C - 1) sum_k (1 + (n_k - 1) rho)`` under the
    Dirichlet-multinomial, so ``rho = (X^2 / (C - 1) - K) / sum_k (n_k - 1)``, cut to
    ``[0, 0.999]``; 0 with fewer than two clients (nothing to estimate it from)."""
    p = _check_prior(prior)
    keep = p > 0
    t = np.array([np.asarray(c, dtype=np.float64) for c in counts if np.sum(c) > 0])
    if len(t) < 2 or keep.sum() < 2:
        return 0.0
    n = t.sum(axis=1)
    denom = float(np.sum(n - 1))
    if denom <= 0:
        return 0.0
    t, q = t[:, keep], p[keep]
    x2 = float(np.sum((t - n[:, None] * q) ** 2 / (n[:, None] * q)))
    rho = (x2 / (keep.sum() - 1) - len(t)) / denom
    # a rounding error of X^2 at exactly K (C - 1) is no overdispersion
    return 0.0 if rho <= 1e-9 else float(min(rho, 0.999))


def _fresh_labels(n: int, prior: np.ndarray, rho: float, rng: np.random.Generator
                  ) -> np.ndarray:
    """``DRAWS`` count vectors of ``n`` labels: Multinomial(n, prior), or
    Dirichlet-multinomial with overdispersion ``rho`` (module docstring)."""
    if rho <= 0:
        return rng.multinomial(n, prior, size=DRAWS)
    keep = prior > 0
    p = np.zeros((DRAWS, len(prior)))
    p[:, keep] = rng.dirichlet((1.0 / rho - 1.0) * prior[keep], size=DRAWS)
    return rng.multinomial(n, p)


def _client_null(cases: Sequence[LabelCase], prior: np.ndarray, rho: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``DRAWS`` draws of each case's ``h*`` (an array cases x draws) and of the client's
    ``sum_u d_u``, with its true labels drawn afresh: once for all its cases when they hold
    the same counts (the same samples every round), else once per case."""
    shared = all(np.array_equal(c.true, cases[0].true) for c in cases)
    hits = np.zeros((len(cases), DRAWS), dtype=np.int64)
    diff = np.zeros(DRAWS, dtype=np.int64)
    draw = _fresh_labels(int(cases[0].true.sum()), prior, rho, rng) if shared else None
    for i, c in enumerate(cases):
        t = draw if shared else _fresh_labels(int(c.true.sum()), prior, rho, rng)
        hits[i] = np.minimum(c.guess[None, :], t).sum(axis=1)
        diff += hits[i] - np.minimum(c.baseline[None, :], t).sum(axis=1)
    return hits, diff


def _upper_tail(null: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``#{null >= v} / len(null)`` for each ``v`` of ``values``."""
    s = np.sort(null)
    return (len(s) - np.searchsorted(s, values, side="left")) / len(s)


def _worst_round(hits: np.ndarray, observed: np.ndarray) -> tuple[float, float]:
    """The most exposed round's max-statistic test (module docstring): the observed
    rounds' smallest tail against the null draws' smallest, ``(p_above, p_below)``
    (``p_below`` with the lower tails likewise)."""
    def p(null: np.ndarray, obs: np.ndarray) -> float:
        smallest = min(float(_upper_tail(h, np.array([o]))[0]) for h, o in zip(null, obs))
        draws = np.min([_upper_tail(h, h) for h in null], axis=0)
        return float((1 + (draws <= smallest).sum()) / (null.shape[1] + 1))

    return p(hits, observed), p(-hits, -observed)


@dataclass(frozen=True)
class NullTest:
    """What the attack recovered against its null draws (module docstring: a client's
    most exposed round, or the pooled ``H``): the one-sided p-values; the labels behind
    them (a sample attacked at three rounds counts thrice), the distinct samples (the unit
    of independence) and the spread of the null draws of ``sum_u d_u`` around their mean,
    their 2.5 % and 97.5 % quantiles (in labels)."""

    p_above: float
    p_below: float
    labels: int
    samples: int
    spread: tuple[float, float]

    def interval(self, share: float) -> tuple[float, float]:
        """A 95 % interval of the share ``sum_u d_u / labels`` under a shift model: the
        share minus the null spread, ``[share - q97.5 / labels, share - q2.5 / labels]`` --
        the sampling of a client's labels as the null draws them, around what the attack
        recovered (an approximation: an attack that reads the update may vary less)."""
        return share - self.spread[1] / self.labels, share - self.spread[0] / self.labels


def _test(p: tuple[float, float], diff: np.ndarray, labels: int, samples: int) -> NullTest:
    lo, hi = np.quantile(diff - diff.mean(), [0.025, 0.975])
    return NullTest(p[0], p[1], labels, samples, (float(lo), float(hi)))


def _samples(cases: Sequence[LabelCase]) -> int:
    """The distinct samples behind a client's cases: one case's when all hold the same
    counts (the same samples every round), else their sum."""
    if all(np.array_equal(c.true, cases[0].true) for c in cases):
        return int(cases[0].true.sum())
    return sum(int(c.true.sum()) for c in cases)


def null_pvalues(cases: Sequence[LabelCase], prior: ArrayLike
                 ) -> tuple[NullTest, dict[int, NullTest], float]:
    """The conditional test of the module docstring: the pooled :class:`NullTest`, one per
    client, each of the attack's labels recovered against its null draws, and the
    overdispersion the draws used.  Each client's draws come from its own seeded stream."""
    p = _check_prior(prior)
    if not cases:
        raise ValueError("no cases")
    for c in cases:
        if not (len(c.guess) == len(c.baseline) == len(c.true) == len(p)):
            raise ValueError(f"client {c.client}: counts over {len(c.guess)}, "
                             f"{len(c.baseline)}, {len(c.true)} classes; the prior has {len(p)}")
    by_client: dict[int, list[LabelCase]] = {}
    for c in cases:
        by_client.setdefault(c.client, []).append(c)
    rho = overdispersion([mine[0].true for mine in by_client.values()], p)
    total_hits = np.zeros(DRAWS, dtype=np.int64)
    total_diff = np.zeros(DRAWS, dtype=np.int64)
    per: dict[int, NullTest] = {}
    for k, mine in sorted(by_client.items()):
        hits, diff = _client_null(mine, p, rho, np.random.default_rng([SEED, k + 2]))
        per[k] = _test(_worst_round(hits, np.array([c.hits for c in mine])), diff,
                       sum(int(c.true.sum()) for c in mine), _samples(mine))
        total_hits += hits.sum(axis=0)
        total_diff += diff
    observed = sum(c.hits for c in cases)
    b = DRAWS + 1
    pooled = _test((float((1 + (total_hits >= observed).sum()) / b),
                    float((1 + (total_hits <= observed).sum()) / b)), total_diff,
                   sum(int(c.true.sum()) for c in cases),
                   sum(_samples(mine) for mine in by_client.values()))
    return pooled, per, rho
