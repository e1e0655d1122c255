"""Splits (train / holdout / test), partitioning of ``train`` across clients, canaries.

Partitioning uses flwr-datasets' partitioners (IidPartitioner, DirichletPartitioner,
PathologicalPartitioner) over a tiny Hugging Face table of (global id, label); they return
rows, from which we read the global ids back.  The rows are shuffled with the scenario seed
first because IidPartitioner shards contiguously.

Text data (:attr:`Dataset.text` set) is split and partitioned by speech
(:mod:`fedaudit.data.text`): the same partitioners deal whole speeches labelled by their
role, and ``speaker`` gives each client one role.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from fedaudit.errors import ScenarioError
from fedaudit.data.datasets import Dataset, load_dataset
from fedaudit.data.datasets.base import TextMeta
from fedaudit.data.secrets import PlantedSecrets, plant_secrets
from fedaudit.data.text import (speaker_clients, speech_labels, split_speeches,
                                subsample_text)
from fedaudit.dp_audit.canaries import SampleCanaries, draw_sample_canaries
from fedaudit.dp_audit.levels import planted_level
from fedaudit.scenario import CanariesConfig, DataConfig, DpAuditConfig, Scenario


@dataclass(frozen=True)
class FederatedData:
    name: str
    x: np.ndarray  # float32 (N, C, H, W); canaries already applied; text: int64 (N, L)
    y: np.ndarray  # int64 (N,); canaries already applied; text: int64 (N, L) next tokens
    classes: tuple[str, ...]  # text: the vocabulary
    train: np.ndarray  # global ids of member samples (union of the clients)
    holdout: np.ndarray  # global ids of non-members (attack)
    test: np.ndarray  # global ids for accuracy and r_Qn
    clients: tuple[np.ndarray, ...]  # global ids per client (partition of train)
    canary: np.ndarray  # bool (N,)
    notes: tuple[str, ...] = ()  # the loader's (Dataset.notes)
    #: the DP audit's canary samples ([audit.dp], sample level): drawn from the holdout
    #: split (and removed from ``holdout``), the included ones appended to their client's
    #: ids, their wrong labels already in ``y``; None without a sample-level audit
    dp_canaries: SampleCanaries | None = None
    #: text data: each sequence's role and speech (Dataset.text); None for images
    text: TextMeta | None = None
    #: the secret-sharer canaries (``[canaries] kind = "secret"``), None without
    secrets: PlantedSecrets | None = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def auxiliary(self) -> np.ndarray:
        """The samples a server may hold beside the clients' (no client holds them): the
        holdout split, or the test split when there is no holdout."""
        return self.holdout if len(self.holdout) else self.test

    def client_of(self) -> np.ndarray:
        """int (N,) client index of every sample, -1 outside train."""
        owner = np.full(len(self.y), -1, dtype=np.int64)
        for c, ids in enumerate(self.clients):
            owner[ids] = c
        return owner


def split_ids(y: np.ndarray, holdout_fraction: float, test_fraction: float,
              seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified, disjoint train / holdout / test ids (sorted) over ``range(len(y))``."""
    from sklearn.model_selection import train_test_split

    ids = np.arange(len(y))
    counts = np.bincount(y)
    stratify_ok = counts[counts > 0].min() >= 3
    rest, test = train_test_split(ids, test_size=test_fraction, random_state=seed,
                                  stratify=y if stratify_ok else None)
    frac = holdout_fraction / (1.0 - test_fraction)
    train, holdout = train_test_split(rest, test_size=frac, random_state=seed + 1,
                                      stratify=y[rest] if stratify_ok else None)
    return np.sort(train), np.sort(holdout), np.sort(test)


def data_shortfall(d: DataConfig, available: int, text: bool = False) -> str | None:
    """One line when ``data.max_samples`` asks for more samples than the data has
    (``available``): the sizes the scenario's split was made for and what the data gives.
    ``max_samples`` is an upper bound, so this is no error by itself; it is the cause of
    the size checks that then fail (:func:`blaming_shortfall`)."""
    if not d.max_samples or d.max_samples <= available:
        return None
    if text:
        return (f"data: data.max_samples = {d.max_samples:,} sequences, the data has "
                f"{available:,}")
    # the sizes split_ids gives that many samples (its rounding, not a copy of it)
    train, holdout, test = map(len, split_ids(np.zeros(d.max_samples, np.int64),
                                              d.holdout_fraction, d.test_fraction, 0))
    return (f"data: the split needs {d.max_samples:,} samples ({train:,} train + {holdout:,} "
            f"holdout + {test:,} test, data.max_samples = {d.max_samples}), the data has "
            f"{available:,}: give the scenario at least {d.max_samples:,} samples or lower "
            f"data.max_samples")


@contextlib.contextmanager
def blaming_shortfall(d: DataConfig, available: int, text: bool = False) -> Iterator[None]:
    """A :class:`ScenarioError` raised inside, prefixed with :func:`data_shortfall` where
    the data is smaller than the scenario's split: a split too small for an absolute size
    (a population, canaries, clients) then names its cause, the missing data."""
    try:
        yield
    except ScenarioError as exc:
        short = data_shortfall(d, available, text)
        if short is None or str(exc).startswith(short):
            raise
        raise ScenarioError(f"{short} -- {exc}") from None


def partition_ids(train: np.ndarray, labels: np.ndarray, num_clients: int, scheme: str,
                  seed: int, *, alpha: float = 0.5, min_partition_size: int = 2,
                  classes_per_client: int = 2) -> list[np.ndarray]:
    """Partition global ``train`` ids (with their ``labels``) across ``num_clients``."""
    import datasets as hf
    from flwr_datasets.partitioner import (DirichletPartitioner, IidPartitioner,
                                           PathologicalPartitioner)

    if num_clients > len(train):
        raise ScenarioError(f"federation.num_clients = {num_clients}: more clients than "
                            f"training samples ({len(train)})")
    order = np.random.default_rng(seed).permutation(len(train))
    table = hf.Dataset.from_dict({"id": train[order].tolist(), "label": labels[order].tolist()})
    if scheme == "iid":
        part = IidPartitioner(num_partitions=num_clients)
    elif scheme == "dirichlet":
        part = DirichletPartitioner(num_partitions=num_clients, partition_by="label",
                                    alpha=alpha, min_partition_size=min_partition_size,
                                    self_balancing=False, shuffle=True, seed=seed)
    elif scheme == "pathological":
        n_classes = len(np.unique(labels))
        if classes_per_client > n_classes:
            raise ScenarioError(f"data.classes_per_client = {classes_per_client}: the data has "
                                f"only {n_classes} classes")
        part = PathologicalPartitioner(num_partitions=num_clients, partition_by="label",
                                       num_classes_per_partition=classes_per_client,
                                       class_assignment_mode="random", shuffle=True, seed=seed)
    else:  # guarded by the schema
        raise ValueError(f"unknown partitioner {scheme!r}")
    part.dataset = table
    try:
        parts = [np.sort(np.asarray(part.load_partition(i)["id"], dtype=np.int64))
                 for i in range(num_clients)]
    except ValueError as exc:
        raise ScenarioError(f"data.partitioner = {scheme!r}: cannot partition "
                            f"{len(train)} samples into {num_clients} clients: {exc}") from None
    empty = [i for i, p in enumerate(parts) if len(p) == 0]
    if empty:
        raise ScenarioError(f"data.partitioner = {scheme!r}: client {empty[0]} receives no "
                            "samples; use fewer clients or a larger alpha")
    return parts


def partition_data(ids: np.ndarray, y: np.ndarray, text: TextMeta | None, num_clients: int,
                   d: DataConfig, seed: int) -> list[np.ndarray]:
    """``ids`` across ``num_clients`` by ``data.partitioner``: :func:`partition_ids` over
    the samples' labels for images; for text, over the speeches of ``ids`` (labelled by
    role, so dirichlet / pathological skew the roles a client holds, and
    ``min_partition_size`` counts speeches), every speech's sequences to its client, and
    ``speaker`` by :func:`fedaudit.data.text.speaker_clients`."""
    if text is None:
        if d.partitioner == "speaker":
            raise ScenarioError("data.partitioner = 'speaker' needs text data with speaker "
                                f"roles (e.g. data.dataset = 'shakespeare'), not {d.dataset!r}")
        return partition_ids(ids, y[ids], num_clients, d.partitioner, seed, alpha=d.alpha,
                             min_partition_size=d.min_partition_size,
                             classes_per_client=d.classes_per_client)
    if d.partitioner == "speaker":
        return speaker_clients(ids, text, num_clients, d.min_role_sequences)[0]
    speeches, roles = speech_labels(ids, text)
    try:
        parts = partition_ids(speeches, roles, num_clients, d.partitioner, seed,
                              alpha=d.alpha, min_partition_size=d.min_partition_size,
                              classes_per_client=d.classes_per_client)
    except ScenarioError as exc:
        raise ScenarioError(f"{exc} (text data: the partitioned samples are the "
                            f"{len(speeches)} training speeches)") from None
    return [ids[np.isin(text.speech[ids], p)] for p in parts]


def cap_clients(clients: list[np.ndarray], cap: int | Sequence[int],
                seed: int) -> list[np.ndarray]:
    """Each client's partition cut to at most ``cap`` samples (``data.client_samples``): a
    random subset, seeded per client, sorted; a cap of 0 keeps every sample.  ``cap`` is one
    number for every client or a sequence with one per client."""
    caps = [cap] * len(clients) if isinstance(cap, (int, np.integer)) else list(cap)
    if len(caps) != len(clients):
        raise ValueError(f"{len(caps)} caps for {len(clients)} clients")
    if not any(caps):
        return clients
    return [ids if not k or len(ids) <= k else
            np.sort(np.random.default_rng([seed, 39, c]).choice(ids, size=k, replace=False))
            for c, (ids, k) in enumerate(zip(clients, caps))]


def inject_canaries(x: np.ndarray, y: np.ndarray, clients: list[np.ndarray], count: int,
                    owners: list[int], kind: str, num_classes: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Turn ``count`` samples of each listed client into canaries; returns copies of x, y
    and the canary mask.  ``mislabeled``: label shifted to a different random class;
    ``noise``: image replaced by uniform noise (label kept)."""
    rng = np.random.default_rng([seed, 7919])
    x, y = x.copy(), y.copy()
    mask = np.zeros(len(y), dtype=bool)
    for c in sorted(set(owners)):
        ids = clients[c]
        if count > len(ids):
            raise ScenarioError(f"canaries.count = {count}: client {c} has only {len(ids)} "
                                "samples")
        chosen = rng.choice(ids, size=count, replace=False)
        mask[chosen] = True
        if kind == "mislabeled":
            y[chosen] = (y[chosen] + rng.integers(1, num_classes, size=count)) % num_classes
        else:
            x[chosen] = rng.random(x[chosen].shape, dtype=np.float32)
    return x, y, mask


def _subsample(ds: Dataset, max_samples: int, seed: int) -> Dataset:
    if not max_samples or max_samples >= len(ds.y):
        return ds
    if max_samples < 10:
        raise ScenarioError(f"data.max_samples = {max_samples}: too few; allowed: 0 (all) "
                            "or >= 10")
    from sklearn.model_selection import train_test_split

    counts = np.bincount(ds.y)
    stratify = ds.y if max_samples >= len(counts) and counts[counts > 0].min() >= 2 else None
    keep, _ = train_test_split(np.arange(len(ds.y)), train_size=max_samples,
                               random_state=seed, stratify=stratify)
    keep = np.sort(keep)
    return Dataset(ds.name, ds.x[keep], ds.y[keep], ds.classes, ds.notes)


def build_federated_data(scenario: Scenario) -> FederatedData:
    """Deterministic data of a scenario (same ``[data]``, ``[canaries]``, seed and number
    of clients: same ids; cached per process)."""
    dp = scenario.audit.dp
    level = planted_level(dp)
    return _build_cached(scenario.data, scenario.canaries, scenario.seed,
                         scenario.federation.num_clients,
                         dp if level is not None and level.plants_samples else None)


def _plant_dp_canaries(y: np.ndarray, holdout: np.ndarray, clients: list[np.ndarray],
                       m: int, num_classes: int,
                       seed: int) -> tuple[np.ndarray, np.ndarray, SampleCanaries]:
    """Draw the audit's canaries from the holdout; returns (y with their wrong labels,
    the holdout without them, the canaries) and appends the included ones to ``clients``."""
    if m > len(holdout) // 2:
        raise ScenarioError(f"audit.dp.canaries = {m}: the canaries come from the holdout "
                            f"split ({len(holdout)} samples), which must keep at least half "
                            f"for the attacks' non-members; allowed: 0..{len(holdout) // 2}")
    can = draw_sample_canaries(holdout, y, m, len(clients), num_classes, seed)
    y = y.copy()
    y[can.ids] = can.label
    for c in range(len(clients)):
        clients[c] = np.sort(np.concatenate([clients[c], can.ids[can.client == c]]))
    return y, np.setdiff1d(holdout, can.ids), can


@functools.lru_cache(maxsize=4)
def _build_cached(d: DataConfig, can: CanariesConfig, seed: int,
                  num_clients: int, dp: DpAuditConfig | None = None) -> FederatedData:
    ds = load_dataset(d)
    with blaming_shortfall(d, len(ds.y), text=ds.text is not None):
        if ds.text is not None:
            return _build_text(ds, d, can, seed, num_clients, dp)
        return _build_images(ds, d, can, seed, num_clients, dp)


def _build_images(ds: Dataset, d: DataConfig, can: CanariesConfig, seed: int,
                  num_clients: int, dp: DpAuditConfig | None) -> FederatedData:
    ds = _subsample(ds, d.max_samples, seed)
    if len(ds.y) < 10:
        raise ScenarioError(f"data: {ds.name} has only {len(ds.y)} samples; need at least 10")
    train, holdout, test = split_ids(ds.y, d.holdout_fraction, d.test_fraction, seed)
    clients = cap_clients(partition_data(train, ds.y, None, num_clients, d, seed),
                          d.client_samples, seed)
    x, y, canary = ds.x, ds.y, np.zeros(len(ds.y), dtype=bool)
    if can.count:
        x, y, canary = inject_canaries(ds.x, ds.y, clients, can.count, list(can.clients),
                                       can.kind, len(ds.classes), seed)
    dp_canaries = None
    if dp is not None:
        y, holdout, dp_canaries = _plant_dp_canaries(y, holdout, clients, dp.canaries,
                                                     len(ds.classes), seed)
    for arr in (x, y, canary):
        arr.setflags(write=False)
    return FederatedData(ds.name, x, y, ds.classes, np.sort(np.concatenate(clients)), holdout,
                         test, tuple(clients), canary, ds.notes, dp_canaries)


def _build_text(ds: Dataset, d: DataConfig, can: CanariesConfig, seed: int, num_clients: int,
                dp: DpAuditConfig | None) -> FederatedData:
    """Text data: split and partitioned by speech (:mod:`fedaudit.data.text`).  With
    ``speaker`` the holdout and test splits keep only the clients' roles, so members and
    non-members come from the same speakers; the other roles' sequences are in no split."""
    if can.count and can.kind != "secret":
        raise ScenarioError(f"canaries.kind = {can.kind!r}: the {can.kind} canaries are "
                            f"images; text data ({ds.name!r}) takes canaries.kind = 'secret'")
    if dp is not None:
        raise ScenarioError(f"audit.dp.canaries = {dp.canaries}: sample-level DP canaries "
                            f"are mislabeled images; text data ({ds.name!r}) has none yet")
    ds = subsample_text(ds, d.max_samples, seed)
    text = ds.text
    assert text is not None
    if len(ds.y) < 10:
        raise ScenarioError(f"data: {ds.name} has only {len(ds.y)} sequences; need at least "
                            "10 (lower data.seq_len)")
    if d.partitioner == "speaker" and not text.roles:
        raise ScenarioError(f"data.path = {d.path!r}: no 'NAME:' speeches, which "
                            "data.partitioner = 'speaker' needs; use data.partitioner = 'iid'")
    train, holdout, test = split_speeches(text, d.holdout_fraction, d.test_fraction, seed)
    empty = [n for n, ids in (("train", train), ("holdout", holdout), ("test", test))
             if not len(ids)]
    if empty:
        raise ScenarioError(f"data: the {len(np.unique(text.speech))} speeches of {ds.name!r} "
                            f"leave the {empty[0]} split empty; use more text or a smaller "
                            "data.seq_len")
    clients = cap_clients(partition_data(train, ds.y, text, num_clients, d, seed),
                          d.client_samples, seed)
    if d.partitioner == "speaker":
        roles = text.speaker[[c[0] for c in clients]]
        holdout = holdout[np.isin(text.speaker[holdout], roles)]
        test = test[np.isin(text.speaker[test], roles)]
    x, y, vocab = ds.x, ds.y, ds.classes
    canary, secrets = np.zeros(len(ds.y), dtype=bool), None
    if can.count:  # canaries.clients < num_clients = len(clients): config/checks.py
        p = plant_secrets(x, y, vocab, text, clients, can, seed)
        x, y, vocab, text, clients, canary, secrets = (p.x, p.y, p.vocab, p.text, p.clients,
                                                       p.canary, p.secrets)
    for arr in (x, y, canary, text.speaker, text.speech):
        arr.setflags(write=False)
    return FederatedData(ds.name, x, y, vocab, np.sort(np.concatenate(clients)),
                         holdout, test, tuple(clients), canary, ds.notes, None, text, secrets)
