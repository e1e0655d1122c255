"""The auditor's reference federations (LiRA / RMIA, :mod:`fedaudit.audit.reference_models`)
trained through Flower: the target's strategy stack, the target's ClientApp.

Each reference federation gets its own strategy from
:func:`~fedaudit.simulation.strategy_factory.make_strategy` -- the scenario's Flower
strategy inside the defense's Flower DP wrapper, exactly as the target's (without the
client-level DP audit's canary clients) -- and is driven round by round with Flower's own
``configure_train`` / ``aggregate_train``.  Each strategy samples from a grid of
``num_clients`` virtual nodes (1..n: node v is the reference's client v - 1), with Python's
``random`` seeded from (reference seed, round) around the call, so which clients a round
samples does not depend on the real nodes' ids.  Every train message then carries the
client's sample ids and index (``wire.REFERENCE_IDS`` / ``wire.REFERENCE_CLIENT``) and goes
to a real node:

* :class:`GridRunner` -- through the run's grid (the Ray actors of ``fedaudit run``, with the
  scenario's ``client_resources``: GPUs and cluster nodes are used), the messages of
  several references in one ``send_and_receive``, so their clients train at once;
* :class:`LocalRunner` -- the ClientApp called in this process, one message after another.

Replies are sorted by client before ``aggregate_train`` (as the auditing strategy sorts the
target's), so the aggregate never depends on arrival order: both runners give the same
bits on CPU (tests/e2e/test_reference_runs.py,
``test_grid_and_driver_trained_references_are_identical``).  A failed reply is left out as
Flower's strategies leave it out; a round whose aggregate is empty keeps the model, as
Flower's ``Strategy.start`` does.
"""

from __future__ import annotations

import contextlib
import logging
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import (ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict)
from flwr.serverapp import Grid

from fedaudit.audit.reference_models import ReferenceJob
from fedaudit.config import to_toml
from fedaudit.data import FederatedData
from fedaudit.servers import served_model
from fedaudit.scenario import Scenario
from fedaudit.simulation.strategy_factory import make_strategy
from strategies import wire

log = logging.getLogger("fedaudit")

__all__ = ["GridRunner", "LocalRunner", "reference_trainer", "train_references"]

State = dict[str, torch.Tensor]


class VirtualGrid(Grid):
    """What one reference's strategy samples from: nodes 1..n, nothing else."""

    def __init__(self, n: int) -> None:
        self._ids = list(range(1, n + 1))

    def get_node_ids(self) -> Iterable[int]:
        return list(self._ids)

    def _unused(self, *_, **__):  # the driver sends; the strategy only samples
        raise NotImplementedError("a reference strategy only samples its virtual nodes")

    set_run = create_message = push_messages = pull_messages = send_and_receive = _unused

    @property
    def run(self):  # noqa: D401 - Grid's abstract property
        raise NotImplementedError


@contextlib.contextmanager
def python_random_seed(seed: int) -> Iterator[None]:
    """Seed Python's global ``random`` (Flower's ``sample_nodes``) for the block, then
    restore its state (the target's own sampling continues unaffected)."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


@contextlib.contextmanager
def task_identity() -> Iterator[None]:
    """Outside a Flower run (tests, experiments, the labs) ``Message`` needs a run and node
    identity: a placeholder one for the block (a ServerApp's own is left alone)."""
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.task_identity import TaskIdentity

    if TaskIdentity._run_id is not None:  # inside a run
        yield
        return
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 0, SUPERLINK_NODE_ID, 0
    try:
        yield
    finally:
        TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None


@dataclass
class _Outgoing:
    job: int       # position in the batch
    client: int    # the reference's client index
    message: Message


class GridRunner:
    """Sends every reference train message of a round through ``grid`` at once."""

    def __init__(self, grid: Grid, timeout: float | None = None) -> None:
        self.grid = grid
        self.timeout = timeout

    def __call__(self, outgoing: list[_Outgoing]) -> list[tuple[int, int, Message]]:
        nodes = sorted(self.grid.get_node_ids())
        sent = [Message(o.message.content, nodes[i % len(nodes)],
                        o.message.metadata.message_type, group_id=o.message.metadata.group_id)
                for i, o in enumerate(outgoing)]
        replies = list(self.grid.send_and_receive(sent, timeout=self.timeout))
        if not all(m.metadata.message_id for m in sent):  # an in-memory grid sets them
            raise RuntimeError("this grid does not report the ids of the messages it sent; "
                               "set attack.reference.runtime = 'driver'")
        by_id = {m.metadata.message_id: o for m, o in zip(sent, outgoing)}
        out = [(by_id[r.metadata.reply_to_message_id].job,
                by_id[r.metadata.reply_to_message_id].client, r)
               for r in replies if r.metadata.reply_to_message_id in by_id]
        if len(out) < len(sent):
            log.warning("reference models: %d of %d clients did not reply within "
                        "federation.timeout; their rounds aggregate without them",
                        len(sent) - len(out), len(sent))
        return out


class LocalRunner:
    """Runs each reference train message through the ClientApp in this process."""

    def __init__(self) -> None:
        from fedaudit.simulation.client import make_client_app

        self.app = make_client_app()

    def __call__(self, outgoing: list[_Outgoing]) -> list[tuple[int, int, Message]]:
        out = []
        threads = torch.get_num_threads()  # the ClientApp sets the client's thread count
        try:
            for o in outgoing:
                msg = o.message
                msg.metadata.__dict__["_message_id"] = str(uuid.uuid4())  # as a grid does
                ctx = Context(run_id=0, node_id=o.client + 1,
                              node_config={wire.PARTITION_ID: o.client},
                              state=RecordDict(), run_config={})
                try:
                    reply = self.app(msg, ctx)
                except Exception as exc:  # noqa: BLE001 - a failed client is left out
                    reply = Message(Error(code=0, reason=f"{type(exc).__name__}: {exc}"),
                                    reply_to=msg)
                out.append((o.job, o.client, reply))
        finally:
            torch.set_num_threads(threads)
        return out


Runner = Callable[[list[_Outgoing]], list[tuple[int, int, Message]]]


def _round_seed(seed: int, rnd: int) -> int:
    return int(np.random.SeedSequence([seed, rnd, 0x5A]).generate_state(1)[0])


def train_references(scenario: Scenario, data: FederatedData, jobs: Sequence[ReferenceJob],
                     runner: Runner, *,
                     on_round: Callable[[int, int, State], None] | None = None,
                     round_done: Callable[[int, int], None] | None = None,
                     ) -> Iterator[tuple[ReferenceJob, State]]:
    """Train ``jobs`` together, round by round; yield each job with its final state.
    ``on_round(job position, round, state)`` sees every global state (the r_Qn
    validation's trajectories); ``round_done(round, rounds)`` follows each round
    (progress)."""
    with task_identity():
        yield from _train(scenario, data, jobs, runner, on_round, round_done)


def _train(scenario: Scenario, data: FederatedData, jobs: Sequence[ReferenceJob],
           runner: Runner, on_round: Callable[[int, int, State], None] | None,
           round_done: Callable[[int, int], None] | None,
           ) -> Iterator[tuple[ReferenceJob, State]]:
    fed = scenario.federation
    text = to_toml(scenario)
    strategies = [make_strategy(scenario, seed=job.seed, canary_clients=False) for job in jobs]
    arrays = [ArrayRecord(served_model(scenario, data, seed=job.seed).state_dict())
              for job in jobs]
    grid = VirtualGrid(fed.num_clients)
    for rnd in range(1, fed.rounds + 1):
        outgoing: list[_Outgoing] = []
        for j, (job, strategy) in enumerate(zip(jobs, strategies)):
            config = ConfigRecord({wire.SCENARIO: text, wire.TRAIN_SEED: job.seed})
            with python_random_seed(_round_seed(job.seed, rnd)):
                messages = list(strategy.configure_train(rnd, arrays[j], config, grid))
            for m in messages:
                c = int(m.metadata.dst_node_id) - 1
                cfg = ConfigRecord(dict(m.content[wire.CONFIG]))
                cfg[wire.REFERENCE_IDS] = job.clients[c].tolist()
                cfg[wire.REFERENCE_CLIENT] = c
                content = RecordDict({wire.ARRAYS: m.content[wire.ARRAYS], wire.CONFIG: cfg})
                outgoing.append(_Outgoing(j, c, Message(content, m.metadata.dst_node_id,
                                                        m.metadata.message_type,
                                                        group_id=str(rnd))))
        replies = runner(outgoing)
        for j, (job, strategy) in enumerate(zip(jobs, strategies)):
            mine = sorted(((c, r) for jj, c, r in replies if jj == j), key=lambda t: t[0])
            for c, r in mine:
                if r.has_error():
                    log.warning("reference model %d, round %d: client %d failed (%s)",
                                job.index + 1, rnd, c, r.error.reason)
            new, _ = strategy.aggregate_train(rnd, [r for _, r in mine])
            if new is not None:
                arrays[j] = new
            else:
                log.warning("reference model %d, round %d: nothing to aggregate; the model "
                            "stays", job.index + 1, rnd)
            if on_round is not None:
                on_round(j, rnd, arrays[j].to_torch_state_dict())
        if round_done is not None:
            round_done(rnd, fed.rounds)
    for job, a in zip(jobs, arrays):
        yield job, a.to_torch_state_dict()


def reference_trainer(scenario: Scenario, data: FederatedData, grid: Grid | None = None,
                      ) -> Callable[..., Iterator[tuple[ReferenceJob, State]]]:
    """The :data:`~fedaudit.audit.reference_models.ReferenceTrainer` of a run: through ``grid``
    when ``attack.reference.runtime`` says so (``auto``: when ``grid`` is the simulation's
    in-memory grid), else in this process."""
    runtime = scenario.attack.reference.runtime
    if runtime == "auto":
        runtime = "grid" if grid is not None and hasattr(grid, "pull_interval") else "driver"
    if runtime == "grid" and grid is None:
        runtime = "driver"
    runner: Runner = (GridRunner(grid, scenario.federation.timeout) if runtime == "grid"
                      else LocalRunner())
    return lambda jobs, round_done=None: train_references(scenario, data, jobs, runner,
                                                          round_done=round_done)
