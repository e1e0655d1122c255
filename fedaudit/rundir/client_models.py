"""The clients' models as the server received them, kept under ``client_models/`` for the
curious-server attacks (the ``clients`` attack target, :mod:`fedaudit.audit.targets`).

Only the rounds that ``attack.rounds`` can still ask for are kept: with ``last``, a
round's folder goes as soon as each of its clients has trained again.  Written while
training by the ``client-models`` probe (:mod:`fedaudit.probes.client_models`), read after
it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from fedaudit.rundir.layout import CLIENT_MODELS_DIR, client_models_round_dir

__all__ = ["client_model_rounds", "drop_superseded_rounds", "drop_unfinished_rounds"]


def client_model_rounds(run_dir: Path) -> dict[int, list[int]]:
    """round -> the clients whose received model is on disk for it."""
    out: dict[int, list[int]] = {}
    root = Path(run_dir) / CLIENT_MODELS_DIR
    for d in sorted(root.glob("round-*")) if root.is_dir() else []:
        m = re.fullmatch(r"round-(\d+)", d.name)
        clients = sorted(int(p.stem.split("-")[1]) for p in d.glob("client-*.pt"))
        if m and clients:
            out[int(m.group(1))] = clients
    return out


def drop_superseded_rounds(run_dir: Path, round_: int) -> None:
    """Under ``attack.rounds = "last"``, after ``round_`` was kept: remove the earlier
    rounds whose clients all trained again since."""
    rounds = client_model_rounds(run_dir)
    latest = {c: r for r, cs in sorted(rounds.items()) for c in cs}
    for r, cs in rounds.items():
        if r < round_ and all(latest[c] > r for c in cs):
            shutil.rmtree(client_models_round_dir(run_dir, r), ignore_errors=True)


def drop_unfinished_rounds(run_dir: Path, finished: int) -> None:
    """Resuming after ``finished`` rounds: the client models saved for a later (unfinished)
    round are not part of the run; remove them so they are never attacked or used as
    FedMIA's references."""
    for r in client_model_rounds(run_dir):
        if r > finished:
            shutil.rmtree(client_models_round_dir(run_dir, r), ignore_errors=True)
