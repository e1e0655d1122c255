"""Splits, subsets and the ``speaker`` partition of text data, with the speech as the unit.

A text dataset's sequences are windows of speeches (:mod:`fedaudit.data.datasets.
shakespeare`); neighbouring windows of one speech share context, so a speech is never
cut between train, holdout and test, nor between two clients, nor by ``max_samples``:

* :func:`split_speeches`: train / holdout / test by speech, stratified by role
  (systematic sampling with a random start in each role, so each split gets its
  fraction of every role's sequences in expectation);
* :func:`speaker_clients`: one client per speaking role (LEAF's Shakespeare, Caldas et
  al. 2018, arXiv 1812.01097), the small roles dropped;
* :func:`subsample_text`: at most ``max_samples`` sequences, as whole speeches;
* :func:`speech_labels`: the speeches of some sequences with their role as a label,
  which the iid / dirichlet / pathological partitioners of
  :func:`fedaudit.data.federated.partition_data` deal out instead of sequences.
"""

from __future__ import annotations

import numpy as np

from fedaudit.data.datasets.base import Dataset, TextMeta
from fedaudit.errors import ScenarioError

__all__ = ["speaker_clients", "speech_labels", "split_speeches", "subsample_text"]


def split_speeches(meta: TextMeta, holdout_fraction: float, test_fraction: float,
                   seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint train / holdout / test sequence ids (sorted), whole speeches each.

    In each role r (text of no role counts as one more role), with N_r sequences, the
    speeches are put in a random order and laid end to end on a circle of length N_r
    from a random start u N_r (u ~ U[0, 1)); a speech of n_s sequences starting at c_s
    has its midpoint at p_s = ((u N_r + c_s + n_s / 2) mod N_r) / N_r and goes to test
    if p_s < test_fraction, to holdout if p_s < test_fraction + holdout_fraction, else to
    train.  Each split thus holds its fraction of every role's sequences in expectation
    and within one speech per role (unlike stratified sampling of sequences, which would
    put windows of one speech in two splits)."""
    rng = np.random.default_rng([seed, 32])
    split = np.full(len(meta.speech), 2, dtype=np.int64)  # 0 test, 1 holdout, 2 train
    for role in np.unique(meta.speaker):
        ids = np.flatnonzero(meta.speaker == role)
        _, inverse, counts = np.unique(meta.speech[ids], return_inverse=True,
                                       return_counts=True)
        order = rng.permutation(len(counts))
        n = counts[order]
        total = n.sum()
        mid = (rng.random() * total + np.cumsum(n) - n / 2.0) % total / total
        goes = np.empty(len(counts), dtype=np.int64)
        goes[order] = np.where(mid < test_fraction, 0,
                               np.where(mid < test_fraction + holdout_fraction, 1, 2))
        split[ids] = goes[inverse]
    return tuple(np.flatnonzero(split == k) for k in (2, 1, 0))  # type: ignore[return-value]


def speaker_clients(train: np.ndarray, meta: TextMeta, num_clients: int,
                    min_role_sequences: int) -> tuple[list[np.ndarray], np.ndarray]:
    """One client per role: the ``num_clients`` roles with the most training sequences
    among those with at least ``min_role_sequences`` (ties: the role met first in the
    file), largest first; client c holds every training sequence of its role.  Smaller
    roles, and text of no role, are dropped (not merged: a merged client would no longer
    be one speaker).  Returns (the clients' sorted ids, their role indices)."""
    if not meta.roles:
        raise ScenarioError("data.partitioner = 'speaker': the text has no 'NAME:' "
                            "speeches (data.path); use data.partitioner = 'iid'")
    spk = meta.speaker[train]
    counts = np.bincount(spk[spk >= 0], minlength=len(meta.roles))
    eligible = np.flatnonzero(counts >= min_role_sequences)
    if len(eligible) < num_clients:
        raise ScenarioError(
            f"federation.num_clients = {num_clients}: data.partitioner = 'speaker' found "
            f"{len(eligible)} roles with at least data.min_role_sequences = "
            f"{min_role_sequences} training sequences; allowed: 1..{len(eligible)}, or "
            "lower data.min_role_sequences")
    chosen = eligible[np.lexsort((eligible, -counts[eligible]))][:num_clients]
    return [train[spk == r] for r in chosen], chosen


def speech_labels(ids: np.ndarray, meta: TextMeta) -> tuple[np.ndarray, np.ndarray]:
    """The distinct speeches of sequences ``ids`` (sorted) and each one's role as a label
    in 0..R (R = len(roles): text of no role)."""
    speeches, first = np.unique(meta.speech[ids], return_index=True)
    role = meta.speaker[ids][first]
    return speeches, np.where(role < 0, len(meta.roles), role)


def subsample_text(ds: Dataset, max_samples: int, seed: int) -> Dataset:
    """At most ``max_samples`` sequences, as whole speeches: speeches are taken in a
    seeded random order until the count is reached (the last one's first windows only, so
    exactly ``max_samples``), then kept in file order; the new ids are positions in the
    subset, the speech numbers those of the file."""
    meta = ds.text
    assert meta is not None
    if not max_samples or max_samples >= len(ds.y):
        return ds
    if max_samples < 10:
        raise ScenarioError(f"data.max_samples = {max_samples}: too few; allowed: 0 (all) "
                            "or >= 10")
    speeches, start, counts = np.unique(meta.speech, return_index=True, return_counts=True)
    order = np.random.default_rng([seed, 33]).permutation(len(speeches))
    taken = np.cumsum(counts[order])
    k = int(np.searchsorted(taken, max_samples)) + 1  # speeches needed
    keep = np.zeros(len(ds.y), dtype=bool)
    for j, s in enumerate(order[:k]):
        n = counts[s] - (taken[k - 1] - max_samples if j == k - 1 else 0)
        keep[start[s]:start[s] + n] = True
    keep = np.flatnonzero(keep)
    sub = TextMeta(meta.roles, meta.speaker[keep], meta.speech[keep])
    return Dataset(ds.name, ds.x[keep], ds.y[keep], ds.classes, ds.notes, sub)
