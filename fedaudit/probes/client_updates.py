"""``client-updates``: the cases of the attacks on updates (the families of
:mod:`attacks.update_family`; the ``update-attacks`` audit stage asks for this probe): for
the clients and rounds any enabled family's table selects (``[label_leakage]``,
``[reconstruction]`` ...: ``clients``, ``rounds``), the global model the server sent, each kept
client's model as received and the num_examples its reply declared, under
``updates/round-NNNN/``.  :func:`kept_cases` and :func:`load_case` read them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks.update_family import enabled_families
from fedaudit.probes.base import Probe, RoundRecord, RoundView, register_probe
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.layout import (UPDATES_DIR, update_clients_path, update_model_path,
                                    update_start_path)

__all__ = ["ClientUpdates", "KeptCase", "UpdateSelection", "kept_cases", "load_case"]


@dataclass(frozen=True)
class UpdateSelection:
    """Which (client, round) updates are kept: ``clients`` (None: every client) and
    ``rounds`` (``first``, ``middle``, ``last``, ``all``, ``every N`` or a list of round
    numbers and those words), of ``total`` rounds; ``middle`` is round ceil(total / 2)."""

    clients: tuple[int, ...] | None
    rounds: str | tuple[int | str, ...]
    total: int

    @classmethod
    def of(cls, table: Mapping[str, Any], total: int) -> "UpdateSelection":
        """From a family's table (``clients``: [] = every client)."""
        clients = tuple(table["clients"]) or None
        rounds = table["rounds"]
        return cls(clients, rounds if isinstance(rounds, str) else tuple(rounds), total)

    def _number(self, word: str | int) -> int:
        return {"first": 1, "middle": (self.total + 1) // 2, "last": self.total}.get(
            word, word)  # type: ignore[arg-type]

    def keeps_round(self, round_: int) -> bool:
        if self.rounds == "all":
            return True
        if isinstance(self.rounds, str) and self.rounds.startswith("every "):
            return round_ % int(self.rounds.split()[1]) == 0
        words = (self.rounds,) if isinstance(self.rounds, str) else self.rounds
        return round_ in {self._number(w) for w in words}

    def keeps_client(self, client: int) -> bool:
        return self.clients is None or client in self.clients


@register_probe
class ClientUpdates(Probe):
    name = "client-updates"
    describe = ("each selected client's update with the model it started from (the "
                "reconstruction stage asks for it)")

    def on_round(self, view: RoundView, record: RoundRecord) -> None:
        s = self.run.scenario
        selects = [UpdateSelection.of(s.stages[f.name], s.federation.rounds)
                   for f in enabled_families(s) if "updates" in s.stages[f.name]["on"]]
        kept = [r for r in view.replies
                if any(x.keeps_client(r.client) and x.keeps_round(record.round)
                       for x in selects)]
        if not kept:
            return
        run_dir = record.run_dir
        record.save_state(update_start_path(run_dir, record.round),
                          {k: torch.from_numpy(v) for k, v in kept[0].start.items()})
        for r in kept:
            record.save_state(update_model_path(run_dir, record.round, r.client),
                              {k: torch.from_numpy(v) for k, v in r.model.items()})
        record.save_arrays(update_clients_path(run_dir, record.round),
                           client=np.array([r.client for r in kept], dtype=np.int64),
                           num_examples=np.array([r.num_examples for r in kept],
                                                 dtype=np.int64))


@dataclass(frozen=True)
class KeptCase:
    """One kept (client, round) update."""

    round: int
    client: int
    num_examples: int


def kept_cases(run_dir: Path) -> list[KeptCase]:
    """Every case the probe kept, by round then client (the rounds whose record is whole)."""
    root = Path(run_dir) / UPDATES_DIR
    out = []
    for d in sorted(root.glob("round-*")) if root.is_dir() else []:
        r = int(d.name.split("-")[1])
        path = update_clients_path(run_dir, r)
        if not path.exists():
            continue
        with np.load(path) as z:
            out += [KeptCase(r, int(c), int(n))
                    for c, n in sorted(zip(z["client"].tolist(), z["num_examples"].tolist()))]
    return out


def load_case(run_dir: Path, case: KeptCase) -> tuple[dict[str, torch.Tensor],
                                                       dict[str, torch.Tensor]]:
    """(the start model, the client's model as received) of ``case``."""
    return (load_checkpoint(update_start_path(run_dir, case.round)),
            load_checkpoint(update_model_path(run_dir, case.round, case.client)))
