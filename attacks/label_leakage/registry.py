"""Registry of label-leakage attacks: name -> ``fn(case, **options) -> LabelGuess``, and
the two metrics of a guess.

An attack reads one client's round as the server holds it (an
:class:`attacks.update_case.UpdateCase`: the start model, the update, the known training
recipe and the reply's ``num_examples``) and guesses the *multiset* of labels the client
trained on: one count per class, summing to the number of samples it guessed (for a
one-sample update, one count of 1).  It never sees the true labels; only the metrics do.

Adding an attack is one module in ``attacks/label_leakage/`` with one decorator line::

    from attacks.label_leakage.registry import LabelGuess, register_label_attack

    @register_label_attack("my-guess", label="mine")
    def my_guess(case):
        ...
        return LabelGuess(counts, {"what": "it chose"})

Metrics (pure functions over count vectors, input checks first):

    label_accuracy(g, t) = sum_c min(g_c, t_c) / sum_c t_c     (the multiset overlap)
    count_error(g, t)    = sum_c |g_c - t_c|

With ``sum(g) == sum(t) == n``, ``count_error = 2 n (1 - label_accuracy)``: a guess that
puts k of its n labels in wrong classes has accuracy 1 - k/n and count error 2k.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from fedaudit.options import Field, check_options
from fedaudit.registry import Registry

__all__ = ["LABEL_ATTACKS", "LabelAttackFn", "LabelGuess", "chance_hits", "count_error",
           "get_label_attack",
           "label_accuracy", "label_attack_label", "label_attack_names",
           "label_attack_options", "label_counts", "register_label_attack"]


def _counts(name: str, value: ArrayLike) -> np.ndarray:
    """``value`` as a 1-D int64 array of non-negative integers; ``ValueError`` naming the
    first bad element otherwise."""
    a = np.asarray(value)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one count per class), got shape {a.shape}")
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold integer counts, got dtype {a.dtype}")
    if a.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(a) | (a != np.round(a)))
        if bad.size:
            raise ValueError(f"{name} must hold integer counts; index {int(bad[0])} is "
                             f"{a[bad[0]].item()!r}")
    bad = np.flatnonzero(a < 0)
    if bad.size:
        raise ValueError(f"{name} must be non-negative; index {int(bad[0])} is "
                         f"{a[bad[0]].item()!r}")
    return a.astype(np.int64)


@dataclass(frozen=True)
class LabelGuess:
    """What a label-leakage attack returns: ``counts`` (num_classes,) int64, the guessed
    number of samples of each class (summing to the number of samples guessed), and
    ``info``, what the attack chose or estimated on the way (the impact, the raw counts
    before rounding ...), JSON-friendly values.  Both are read-only."""

    counts: np.ndarray
    info: Mapping[str, Any]

    def __post_init__(self) -> None:
        counts = _counts("LabelGuess.counts", self.counts)
        counts.setflags(write=False)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))

    def __reduce__(self) -> tuple:
        # a mappingproxy does not pickle; a guess travels to and from the run's Ray actors
        return LabelGuess, (np.array(self.counts), dict(self.info))

    @property
    def num_samples(self) -> int:
        return int(self.counts.sum())

    def labels(self) -> np.ndarray:
        """The guessed labels as a sorted (n,) int64 array (class c repeated counts[c]
        times)."""
        return np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)


def label_counts(labels: ArrayLike, num_classes: int) -> np.ndarray:
    """The (num_classes,) int64 counts of a 1-D array of class labels (``np.bincount``
    after checking that every label is an integer in ``[0, num_classes)``)."""
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {y.shape}")
    if y.dtype.kind not in "iu":
        raise ValueError(f"labels must be integers, got dtype {y.dtype}")
    bad = np.flatnonzero((y < 0) | (y >= num_classes))
    if bad.size:
        raise ValueError(f"labels must lie in [0, {num_classes}); index {int(bad[0])} is "
                         f"{int(y[bad[0]])}")
    return np.bincount(y.astype(np.int64), minlength=num_classes).astype(np.int64)


def _pair(guess_counts: ArrayLike, true_counts: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    g = _counts("guess_counts", guess_counts)
    t = _counts("true_counts", true_counts)
    if g.shape != t.shape:
        raise ValueError(f"guess_counts and true_counts must have one count per class each, "
                         f"got {g.shape[0]} and {t.shape[0]} classes")
    return g, t


def label_accuracy(guess_counts: ArrayLike, true_counts: ArrayLike) -> float:
    """The share of the true labels the guess holds, as multisets:

        label_accuracy = sum_c min(g_c, t_c) / sum_c t_c

    (the size of the multiset intersection over the number of true labels; 1.0 when the
    guess holds every true label; order plays no part).  Both arguments are per-class
    counts of non-negative integers (:func:`label_counts` turns labels into counts);
    ``ValueError`` on other shapes or values, or when ``true_counts`` sums to 0.  With
    ``sum(g) == sum(t)`` it is the accuracy Wainakh et al. 2022 report ("User-Level Label
    Leakage from Gradients in Federated Learning", PoPETs 2022; their code matches each
    predicted label to a true label not matched yet and divides the matches by the
    number of predictions)."""
    g, t = _pair(guess_counts, true_counts)
    n = int(t.sum())
    if n == 0:
        raise ValueError("true_counts sums to 0: no label to recover")
    return float(np.minimum(g, t).sum()) / n


def chance_hits(true_counts: ArrayLike) -> float:
    """The labels a guess without information recovers on average: the expected multiset
    overlap ``E[sum_c min(G_c, t_c)]`` of ``n = sum_c t_c`` labels drawn uniformly at random
    over the ``C = len(true_counts)`` classes, ``G ~ Multinomial(n, 1/C)``.  Since
    ``min(G_c, t_c) = sum_{k=1..t_c} [G_c >= k]`` and each ``G_c ~ Binomial(n, 1/C)``,

        chance_hits = sum_c sum_{k=1..t_c} P(Binomial(n, 1/C) >= k)

    (exact; ``chance_hits / n`` is the chance level of :func:`label_accuracy`)."""
    from scipy.stats import binom

    t = np.asarray(true_counts)
    if t.ndim != 1 or t.size == 0 or not np.issubdtype(t.dtype, np.integer) or (t < 0).any():
        raise ValueError("true_counts must be a non-empty 1-d array of non-negative integers")
    n, c = int(t.sum()), t.size
    tail = binom.sf(np.arange(int(t.max()) if n else 0), n, 1.0 / c)  # P(G >= k), k = 1..
    return float(sum(tail[:int(tc)].sum() for tc in t))


def count_error(guess_counts: ArrayLike, true_counts: ArrayLike) -> int:
    """The L1 distance of the count vectors, ``sum_c |g_c - t_c|`` (0 for the exact
    multiset; with equal totals, twice the number of labels guessed in a wrong class).
    Same input checks as :func:`label_accuracy` (a zero total is allowed here)."""
    g, t = _pair(guess_counts, true_counts)
    return int(np.abs(g - t).sum())


class LabelAttackFn(Protocol):
    def __call__(self, case: Any, /, **options: Any) -> LabelGuess: ...


def _check(name: str, fn: Any, meta: dict) -> None:
    if not callable(fn):
        raise TypeError(f"register_label_attack({name!r}) must decorate a callable")
    check_options(f"label attack {name!r}", meta.get("options") or {})


#: name -> attack function, with meta ``label`` (for tables and figures) and ``options``
#: (name -> :class:`fedaudit.options.Field`: the attack's keyword options).
LABEL_ATTACKS: Registry[str, Callable[..., LabelGuess]] = Registry(
    "label attack", name_pattern=r"[a-z][a-z0-9_-]*", check=_check)


def register_label_attack(name: str, *, label: str | None = None,
                          options: Mapping[str, Field] | None = None,
                          replace: bool = False):
    """Decorator: register ``fn(case, **options) -> LabelGuess`` under ``name``
    (lowercase letters, digits, ``-``, ``_``).  ``label`` names it in tables (default:
    the name); ``options`` declares its keyword options as :class:`fedaudit.options.Field`
    (type, default, checks), passed to ``fn``.  Registering a different function under a
    taken name raises ``ValueError`` (unless ``replace``)."""
    return LABEL_ATTACKS.register(name, replace=replace, label=label or name,
                                  options=dict(options or {}))


def label_attack_names() -> list[str]:
    """Sorted names of the registered label attacks."""
    return list(LABEL_ATTACKS.names())


def get_label_attack(name: str) -> Callable[..., LabelGuess]:
    """The attack registered under ``name``; ``ValueError`` listing the allowed names."""
    return LABEL_ATTACKS.get(name)


def label_attack_label(name: str) -> str:
    """The attack's display label (its name when unknown)."""
    return LABEL_ATTACKS.meta(name).get("label", name) if name in LABEL_ATTACKS else name


def label_attack_options(name: str) -> Mapping[str, Field]:
    """The options the attack declared (empty when none)."""
    return LABEL_ATTACKS.meta(name).get("options", {})
