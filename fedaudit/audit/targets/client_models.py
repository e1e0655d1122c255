"""``clients``: each client's model as the server received it -- the curious server
(docs/algorithms.md section 9).

Each client's received model at the selected rounds (``attack.rounds``) is attacked on that
client's own members against its class-matched non-members (before the wrapped strategy
clips or noises anything: under ``dp-client`` the client already clipped it, under
``dp-sgd`` it is the DP-trained model), with the single-model attacks and FedMIA, whose
reference models are the other clients' models of the round (OUT for the client's
samples).  The server keeps these models under ``client_models/`` (the ``client-models``
probe this kind asks for, :mod:`fedaudit.probes.client_models`).

FedMIA over several rounds: the mean over the rounds the server saw of the per-round
scores ``log Pr[Z <= phi]`` (the authors' "averaged log LiRA"; the mean, not the sum,
keeps clients seen in different numbers of rounds on one scale for the pooled metrics),
reported as ``fedmia_combined``.
"""

from __future__ import annotations

import numpy as np

from attacks.membership.reference_signals import ReferenceSignals
from attacks.membership.sequences import as_outcomes
from attacks.membership.registry import server_view, trains_references
from fedaudit.audit.products import ClientView, ServerView
from fedaudit.audit.targets.base import (Target, TargetKind, register_target, selected_rounds,
                                         single_model_methods)
from fedaudit.defenses import get_defense
from fedaudit.metrics import MembershipMetrics
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.client_models import client_model_rounds
from fedaudit.rundir.layout import client_model_path

#: fewest other clients in a round for FedMIA's per-sample Gaussian
FEDMIA_MIN_OTHERS = 3


class _RoundOutputs:
    """Each kept client model's probabilities on every audit sample, computed once per
    round on first use (FedMIA scores a client with the other clients' models of its
    round: without this every model would be loaded again for each client)."""

    def __init__(self, ctx) -> None:
        self.ctx, self.ids = ctx, ctx.pooled.ids
        self._round: int | None = None
        self._probs: dict[int, np.ndarray] = {}

    def of(self, round_: int, client: int, sample_ids: np.ndarray) -> np.ndarray:
        if round_ != self._round:  # one round at a time: bounded memory
            self._round, self._probs = round_, {}
        if client not in self._probs:
            state = load_checkpoint(client_model_path(self.ctx.run_dir, round_, client))
            data = self.ctx.data  # text: each sequence's two outcomes (attacks.membership.sequences)
            self._probs[client] = as_outcomes(self.ctx.oracle(state).predict_proba(
                data.x[self.ids]), data.y[self.ids])[0]
        return self._probs[client][np.searchsorted(self.ids, sample_ids)]

    def signals(self, round_: int, others: list[int]):
        """FedMIA's references for a client of ``round_``: the ``others``' outputs."""
        x, y = self.ctx.data.x, self.ctx.data.y
        return lambda ids: ReferenceSignals.out_only(
            np.stack([self.of(round_, o, ids) for o in others]), x, y)


@register_target
class ClientModels(TargetKind):
    name = "clients"
    describe = "each client's model as the server received it (the curious server)"
    position = "curious server"
    writes = ("server_view",)

    def probes(self, scenario):
        """The clients' models as the server received them."""
        return ("client-models",)

    def methods(self, scenario):
        """The single-model attacks and the server-view ones (FedMIA)."""
        return single_model_methods(scenario) + tuple(
            m for m in scenario.attack.methods if server_view(m))

    def targets(self, ctx):
        """One target per (round, client) the server kept, round by round (each round's
        models are loaded once)."""
        notes = ctx.notes.setdefault(self.name, _skipped_note(ctx.scenario))
        available = client_model_rounds(ctx.run_dir)
        if not available:
            notes.append("no client models were kept (a resumed run keeps only the rounds "
                         "trained after resuming)")
        single = single_model_methods(ctx.scenario)
        server = self.methods(ctx.scenario)[len(single):]
        outputs = _RoundOutputs(ctx)
        selected = {c: selected_rounds(sorted(r for r, cs in available.items() if c in cs),
                                       ctx.scenario.attack.rounds)
                    for c in range(len(ctx.sets))}
        out = []
        for r in sorted({r for rs in selected.values() for r in rs}):
            for c in range(len(ctx.sets)):
                if r not in selected[c]:
                    continue
                others = [o for o in available[r] if o != c]
                methods, refs = single, None
                if server and len(others) >= FEDMIA_MIN_OTHERS:
                    methods, refs = single + server, outputs.signals(r, others)
                elif server:
                    note = (f"FedMIA needs >= {FEDMIA_MIN_OTHERS} other clients in a round; "
                            f"client {c} round {r} had {len(others)}")
                    if note not in notes:
                        notes.append(note)
                if methods:
                    out.append(Target(f"client-model:r{r}", self.name,
                                      lambda r=r, c=c: load_checkpoint(
                                          client_model_path(ctx.run_dir, r, c)),
                                      methods, client=c, references=refs, round=r))
        return out

    def record(self, ctx, results):
        """The :class:`~fedaudit.audit.products.ServerView` (``ctx.server_view``,
        results.json ``server_view``); the rows client by client."""
        cfg = ctx.scenario.attack
        n = len(ctx.sets)
        rounds: list[dict[int, dict]] = [{} for _ in range(n)]
        last: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
        combined: list[list[np.ndarray]] = [[] for _ in range(n)]
        for res in results:
            c = res.target.client
            rounds[c][res.target.round] = {m: o.metrics for m, o in res.outcomes.items()}
            for m, o in res.outcomes.items():
                last[c][m] = o.scores
                if server_view(m):
                    combined[c].append(o.scores)
        server = [m for m in cfg.methods if server_view(m)]
        pooled: dict[str, tuple[list, list, list]] = {}
        clients = []
        for c, s in enumerate(ctx.sets):
            mean = None
            if len(combined[c]) > 1:
                mean = np.mean(combined[c], axis=0)
                last[c].update({m: mean for m in server})
            clients.append(ClientView(c, rounds[c], None if mean is None
                                      else MembershipMetrics.of(mean, s.member)))
            for m, sc in last[c].items():
                pooled.setdefault(m, ([], [], []))
                pooled[m][0].append(sc)
                pooled[m][1].append(s.member)
                pooled[m][2].append(np.full(len(sc), c))
        # each client's model scores its own set (non-members shared between clients):
        # the pooled AUC's unit of independence is the client (fedaudit.verdicts.auc)
        ctx.server_view = ServerView(
            cfg.rounds if isinstance(cfg.rounds, str) else list(cfg.rounds),
            get_defense(ctx.scenario.defense.kind).server_sees, tuple(clients),
            {m: MembershipMetrics.of(np.concatenate(sc), np.concatenate(mm),
                                     clusters=np.concatenate(cl))
             for m, (sc, mm, cl) in pooled.items()},
            tuple(ctx.notes.get(self.name, [])))
        ctx.results["server_view"] = ctx.server_view.as_dict()
        order = sorted(range(len(results)), key=lambda i: results[i].target.client)
        return [row for i in order for row in results[i].rows]


def _skipped_note(scenario) -> list[str]:
    """The reference-model attacks listed (lira, rmia) do not run on client models."""
    skipped = [m for m in scenario.attack.methods if trains_references(m)]
    if not skipped:
        return []
    return [f"{', '.join(skipped)} not run on the clients target (reference models are "
            "trained for the final global model and its quantized releases only)"]
