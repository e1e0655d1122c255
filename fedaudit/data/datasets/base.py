"""The dataset type and registry: :class:`Dataset` (what every loader returns: images as
float32 (N, C, H, W) in [0, 1] and int64 labels, or, for text, int64 token sequences
(N, L) with their next-token targets (N, L) and a :class:`TextMeta`; the position of a
sample in these arrays is its global sample id), :data:`DATASETS` (name -> loader),
:func:`register_dataset` and :func:`load_dataset`.  The built-in loaders are the other
modules of this folder."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fedaudit.options import Field, check_options
from fedaudit.registry import Registry
from fedaudit.scenario import DataConfig


@dataclass(frozen=True)
class TextMeta:
    """What a text dataset keeps per sequence besides its tokens: who speaks it and in
    which speech.  Sequence i is a window of speech ``speech[i]`` (numbered in file
    order) spoken by role ``roles[speaker[i]]``; ``speaker[i] = -1`` for text outside any
    ``NAME:`` speech.  The vocabulary is :attr:`Dataset.classes` (token t is the
    character ``classes[t]``)."""
    roles: tuple[str, ...]  # role names, in order of first appearance
    speaker: np.ndarray  # int64 (N,): index into roles, -1 = no role
    speech: np.ndarray  # int64 (N,): speech index in the file, non-decreasing in i


@dataclass(frozen=True)
class Dataset:
    name: str
    x: np.ndarray  # float32 (N, C, H, W) in [0, 1]; text: int64 (N, L) token ids
    y: np.ndarray  # int64 (N,); text: int64 (N, L), y[i, t] = the token after x[i, t]
    classes: tuple[str, ...]  # class names; text: the vocabulary (one character each)
    #: what the loader wants the user to know (e.g. skipped files): logged to the run's
    #: run.log and listed in results.json ``warnings``
    notes: tuple[str, ...] = ()
    #: text datasets only (None for images)
    text: TextMeta | None = None

    @property
    def kind(self) -> str:
        """``"image"`` or ``"text"``."""
        return "image" if self.text is None else "text"

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.x.shape[1:])  # type: ignore[return-value]


def _check(name: str, fn: Any, meta: dict) -> None:
    if not callable(fn):
        raise TypeError(f"register_dataset({name!r}) must decorate a callable")
    check_options(f"dataset {name!r}", meta.get("options", {}))


#: name -> loader ``fn(data_cfg: DataConfig) -> Dataset`` (``data_cfg``: the scenario's
#: ``[data]`` table); the scenario's ``data.dataset`` choices come from here, and meta
#: ``options`` (name -> Field) are the dataset's own keys of ``[data]``.
DATASETS: Registry[str, Callable[[DataConfig], Dataset]] = Registry(
    "dataset", name_pattern=r"[a-z0-9][a-z0-9_.-]*", check=_check)


def register_dataset(name: str, *, options: Mapping[str, Field] | None = None,
                     replace: bool = False, **meta):
    """Decorator: register a loader ``fn(data_cfg) -> Dataset`` under ``name``;
    ``needs_path=True`` makes ``data.path`` required for it, ``kind="text"`` says that it
    returns token sequences (the scenario checks then ask for a text model).  ``options``
    declares the dataset's own keys (name -> :class:`fedaudit.options.Field`): they join
    the scenario's ``[data]`` table (``--set data.<key>=...``) and the loader reads them
    as ``data_cfg.<key>``."""
    return DATASETS.register(name, replace=replace, options=dict(options or {}), **meta)


def load_dataset(cfg: DataConfig) -> Dataset:
    """Load the dataset named by a resolved ``[data]`` table."""
    return DATASETS.get(cfg.dataset)(cfg)
