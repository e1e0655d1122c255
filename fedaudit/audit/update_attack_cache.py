"""The cache of the attacks on updates: a job's result under a key of everything that decides
it (the start model and the update as received, the local-training recipe, the family, its
attacks, their options, the family's settings and inputs, the device, the client's true labels,
fedaudit's and torch's versions), in
``$FEDAUDIT_CACHE/update-attacks`` (``fedaudit run --cache DIR``), like the reference
models' cache (:mod:`fedaudit.audit.reference_models`).  A second run of the same scenario,
or a report rebuilt with another metric, skips the optimisation; a run that stopped half
way keeps the jobs it finished.  The client and round numbers are not in the key: the same
update gets the same result.

Entries are pickled :class:`~fedaudit.audit.update_attacks.CaseResult` s, written
atomically; they live in the user's own cache folder (never load one from elsewhere).  An
entry that does not load is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from pathlib import Path

import numpy as np
import torch

from fedaudit.version import __version__
from fedaudit.audit.update_attacks import CaseResult, UpdateJob
from fedaudit.rundir.files import atomic_write_bytes, cache_root

log = logging.getLogger("fedaudit")

__all__ = ["cache_dir", "cache_key", "load_cached", "save_cached"]

#: bumped when what a job computes changes without a change in its inputs
_FORMAT = 2


def cache_dir() -> Path:
    return cache_root() / "update-attacks"


def cache_key(job: UpdateJob) -> str:
    """sha256 (40 hex digits) of what decides ``job``'s result."""
    sec = job.scenario.sections()
    spec = job.spec
    recipe = {
        "format": _FORMAT, "fedaudit": __version__, "torch": torch.__version__,
        "model": sec["model"],
        "train": {k: v for k, v in sec["train"].items() if k != "device"},
        "num_examples": job.num_examples, "input_shape": list(job.input_shape),
        "num_classes": job.num_classes, "family": job.family, "methods": list(spec.methods),
        "options": spec.options, "settings": spec.settings, "device": spec.device,
        # a round's aggregate only: the keys of one client's jobs stay as they were
        **({"merged": job.merged} if job.merged != 1 else {}),
    }
    h = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode())
    for state in (job.start, job.received):
        for name in sorted(state):
            t = state[name].detach().cpu().contiguous()
            h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    h.update(np.ascontiguousarray(spec.true_labels, dtype=np.int64).tobytes())
    for name in sorted(spec.inputs):
        a = np.ascontiguousarray(spec.inputs[name])
        h.update(f"{name}:{a.dtype}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:40]


def load_cached(key: str) -> CaseResult | None:
    path = cache_dir() / f"{key}.pkl"
    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            out = pickle.load(f)
        if isinstance(out, CaseResult):
            return out
        raise TypeError(f"holds a {type(out).__name__}")
    except Exception as exc:  # noqa: BLE001 - a damaged entry is recomputed
        log.warning("update-attack cache %s unreadable (%s); recomputing", path, exc)
        return None


def save_cached(key: str, result: CaseResult) -> None:
    """Write ``result`` atomically; a cache that cannot be written is a warning."""
    root = cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(root / f"{key}.pkl", pickle.dumps(result))
    except OSError as exc:
        log.warning("cannot cache an update-attack result under %s: %s", root, exc)
