"""Membership evaluation: choosing members and non-members, running the attacks.

docs/algorithms.md section 5: per client, members are the client's training samples (or a
fixed-size random subset, :func:`sample_members`), and non-members are holdout samples
drawn with the same label histogram (:func:`sample_nonmembers`), so that a skewed
(non-IID) client is not "detected" by its classes alone. :func:`evaluate_attacks` scores
one set of samples with several attacks against one oracle, each attack's outcome an
:class:`AttackOutcome`; the caller slices the scores per client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from attacks.membership.registry import (ATTACKS, AttackScores, get_attack, needs_references,
                              needs_vocabulary)
from fedaudit.metrics import MembershipMetrics

__all__ = ["AttackOutcome", "NonmemberSample", "sample_nonmembers", "sample_members",
           "evaluate_attacks"]

RngLike = np.random.Generator | int | None


def _labels(values: ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer class labels, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


@dataclass(frozen=True)
class NonmemberSample:
    """Result of :func:`sample_nonmembers`.

    Attributes
    ----------
    indices : sorted int64 array of positions in ``holdout_labels`` (no repeats).
    mismatched : number of drawn samples that stand in for a member of another class
        (0 when the label histograms match exactly).
    shortfall : ``{class: missing count}`` for every class the holdout could not cover.
    """

    indices: np.ndarray
    mismatched: int
    shortfall: dict[int, int] = field(default_factory=dict)

    @property
    def matched(self) -> bool:
        return self.mismatched == 0


def sample_nonmembers(
    member_labels: ArrayLike,
    holdout_labels: ArrayLike,
    rng: RngLike,
    *,
    strict: bool = False,
) -> NonmemberSample:
    """Draw ``len(member_labels)`` holdout samples, without replacement, matching labels.

    For each class ``c`` (in increasing order) with ``m_c`` members, draw
    ``min(m_c, h_c)`` of the ``h_c`` holdout samples of class ``c`` uniformly at random.
    If some class lacks samples, ``strict=True`` raises ``ValueError``; otherwise the
    shortfall is topped up uniformly at random from the unused holdout samples of any
    class and reported (``mismatched``, ``shortfall``). Deterministic given ``rng``
    (a ``numpy.random.Generator`` or a seed). Raises ``ValueError`` if the holdout has
    fewer samples than there are members.
    """
    members = _labels(member_labels, "member_labels")
    holdout = _labels(holdout_labels, "holdout_labels")
    gen = np.random.default_rng(rng)
    if members.size > holdout.size:
        raise ValueError(
            f"the holdout has {holdout.size} samples, fewer than the {members.size} members "
            f"to match; use a smaller member subset (sample_members)"
        )
    classes, counts = np.unique(members, return_counts=True)
    chosen: list[np.ndarray] = []
    shortfall: dict[int, int] = {}
    for c, m_c in zip(classes.tolist(), counts.tolist()):
        pool = np.flatnonzero(holdout == c)
        take = min(m_c, pool.size)
        if take < m_c:
            shortfall[int(c)] = int(m_c - take)
        chosen.append(gen.choice(pool, size=take, replace=False))
    if shortfall and strict:
        detail = ", ".join(
            f"class {c}: {n} missing of {int(counts[classes == c][0])}"
            for c, n in shortfall.items()
        )
        raise ValueError(f"the holdout cannot match the members' label histogram ({detail})")
    picked = np.concatenate(chosen) if chosen else np.empty(0, dtype=np.int64)
    missing = int(sum(shortfall.values()))
    if missing:
        unused = np.setdiff1d(np.arange(holdout.size), picked, assume_unique=False)
        picked = np.concatenate([picked, gen.choice(unused, size=missing, replace=False)])
    return NonmemberSample(
        indices=np.sort(picked).astype(np.int64), mismatched=missing, shortfall=shortfall
    )


def sample_members(ids: ArrayLike, max_members: int | None, rng: RngLike) -> np.ndarray:
    """A fixed-size random subset of ``ids`` (without replacement, original order kept).

    ``max_members=None`` or ``>= len(ids)`` returns all of ``ids`` (a copy).
    """
    a = np.asarray(ids)
    if a.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {a.shape}")
    if max_members is not None and (
        isinstance(max_members, bool) or not isinstance(max_members, Integral) or max_members < 1
    ):
        raise ValueError(f"max_members must be a positive integer or None, got {max_members!r}")
    if max_members is None or max_members >= a.size:
        return a.copy()
    gen = np.random.default_rng(rng)
    keep = np.sort(gen.choice(a.size, size=int(max_members), replace=False))
    return a[keep]


@dataclass(frozen=True, eq=False)
class AttackOutcome:
    """One attack's outcome on one set of samples (:func:`evaluate_attacks`).

    Attributes
    ----------
    scores : (N,) float64, higher = more likely a member, in the samples' order.
    queries_per_sample : oracle queries the attack made, divided by N.
    seconds_per_sample : its wall time, divided by N.
    metrics : :class:`fedaudit.metrics.MembershipMetrics` of ``scores`` against the
        membership mask; None when the mask holds a single class.
    info : what the attack reported beside its scores (:class:`attacks.membership.registry.AttackScores`:
        RMIA's ``a``, LiRA's queries per view), read-only; empty for bare scores.
    """

    scores: np.ndarray
    queries_per_sample: float
    seconds_per_sample: float
    metrics: MembershipMetrics | None
    info: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def _length(x: Any, name: str) -> int:
    if not isinstance(x, (np.ndarray, torch.Tensor)):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(x).__name__}")
    if x.ndim < 1:
        raise ValueError(f"{name} must have a leading sample axis")
    return int(x.shape[0])


def evaluate_attacks(
    oracle: Any,
    x: torch.Tensor | np.ndarray,
    y: ArrayLike,
    member_mask: ArrayLike,
    methods: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    on_method: Callable[[str, float], None] | None = None,
    references: Any = None,
    vocabulary: Sequence[str] | None = None,
) -> dict[str, AttackOutcome]:
    """Run each attack in ``methods`` once on all samples of ``x``.

    Parameters
    ----------
    oracle : the target's :class:`attacks.membership.oracle.Oracle`.
    x, y : samples ``(N, ...)`` and their true labels ``(N,)`` (members and
        non-members together, in any order); token sequences ``(N, L)`` with their
        next-token targets ``(N, L)``.
    member_mask : ``(N,)`` 0/1 or bool, 1 = member. Only used for the pooled metrics;
        attacks never see it.
    methods : registered attack names (:data:`attacks.membership.registry.ATTACKS`), no repeats.
    options : ``{method: {option: value}}`` passed to the attack as keyword arguments;
        entries for registered attacks not in ``methods`` are ignored.
    on_method : called as ``on_method(name, seconds)`` after each attack (progress).
    references : :class:`attacks.membership.reference_signals.ReferenceSignals` aligned with ``x``, given to
        the attacks registered with ``references=True`` (required when one is listed).
    vocabulary : the data's classes (text: the character of each token id), given to the
        attacks registered with ``vocabulary=True`` (required when one is listed).

    Returns
    -------
    ``{method: AttackOutcome}`` in the order of ``methods``: each attack's scores (N,),
    queries and seconds per sample (queries counted from ``oracle.queries``, seconds wall
    time / N), :class:`fedaudit.metrics.MembershipMetrics` against ``member_mask`` (None
    when it holds a single class) and what the attack reported (``info``).

    Raises
    ------
    TypeError : ``x`` is neither a numpy array nor a torch tensor.
    ValueError : ``x``, ``y`` or ``member_mask`` of other lengths, no samples, an
        unknown, repeated or empty ``methods``, options for an unknown attack, a reference
        (vocabulary) attack without ``references`` (``vocabulary``); nothing is queried then.
    RuntimeError : an attack returned scores of another shape.
    """
    n = _length(x, "x")
    labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    mask = np.asarray(member_mask)
    if labels.shape != (n,) and labels.shape != tuple(np.shape(x)[:2]):
        raise ValueError(f"y must have shape ({n},) like x (or x's (N, L) for sequences), "
                         f"got {labels.shape}")
    if mask.shape != (n,):
        raise ValueError(f"member_mask must have shape ({n},) like x, got {mask.shape}")
    if n == 0:
        raise ValueError("x holds no samples")
    if isinstance(methods, str):
        methods = [methods]
    methods = list(methods)
    if not methods:
        raise ValueError(f"methods is empty; allowed: {', '.join(sorted(ATTACKS))}")
    dupes = sorted({m for m in methods if methods.count(m) > 1})
    if dupes:
        raise ValueError(f"methods lists {', '.join(dupes)} more than once")
    fns = {m: get_attack(m) for m in methods}
    options = dict(options or {})
    unknown = sorted(set(options) - set(ATTACKS))
    if unknown:
        raise ValueError(
            f"options given for unknown attack(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(ATTACKS))}"
        )
    both_classes = np.unique(mask).size == 2
    need = [m for m in methods if needs_references(m)]
    if need and references is None:
        raise ValueError(f"attack(s) {', '.join(need)} need reference models (references=)")
    words = [m for m in methods if needs_vocabulary(m)]
    if words and vocabulary is None:
        raise ValueError(f"attack(s) {', '.join(words)} need the data's vocabulary "
                         "(vocabulary=)")

    results: dict[str, AttackOutcome] = {}
    for name, fn in fns.items():
        opts = dict(options.get(name) or {})
        if name in need:
            opts["references"] = references
        if name in words:
            opts["vocabulary"] = vocabulary
        q0 = oracle.queries
        t0 = time.perf_counter()
        out = fn(oracle, x, labels, **opts)
        info = dict(out.info) if isinstance(out, AttackScores) else {}
        scores = np.asarray(out.scores if isinstance(out, AttackScores) else out,
                            dtype=np.float64)
        seconds = time.perf_counter() - t0
        if scores.shape != (n,):
            raise RuntimeError(f"attack {name!r} returned shape {scores.shape}, expected ({n},)")
        results[name] = AttackOutcome(
            scores, (oracle.queries - q0) / n, seconds / n,
            MembershipMetrics.of(scores, mask) if both_classes else None,
            MappingProxyType(info))
        if on_method is not None:
            on_method(name, seconds)
    return results
