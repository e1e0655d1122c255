"""The attacks on updates (every family's jobs: :mod:`fedaudit.audit.update_attacks`)
on the run's Ray actors: each (client, round) job goes out through the run's Flower grid as
a ``query.update_attack`` message, a client actor runs it and replies with its result, so
W actors (``federation.client_resources``) run W jobs at once, on the actors' devices.

The job and its result travel pickled inside the message.  That is why the handler is
registered only on the simulation's ClientApp (:func:`simulation_client_app`): there the
driver and the actors are one user's processes that already exchange pickles (Ray ships
the ClientApp itself pickled); a deployed SuperNode never unpickles what a server sends.
``update_attacks.runtime = "auto"`` therefore uses the grid only in simulation and runs the
jobs in the ServerApp's process when deployed (as the reference models do).
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterator, Sequence

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid

from fedaudit.audit.update_attacks import (CaseResult, UpdateJob, UpdateJobRunner, job_error,
                                           run_in_process, run_update_job)
from fedaudit.scenario import Scenario

log = logging.getLogger("fedaudit")

__all__ = ["ACTION", "GridJobRunner", "attack_update", "update_job_runner"]

#: the ClientApp action the jobs go to (message type ``query.update_attack``)
ACTION = "update_attack"
_MESSAGE_TYPE = f"query.{ACTION}"
_KEY = "pickle"
#: seconds between two looks for replies (the in-memory grid's own poll interval)
_POLL = 0.1


def attack_update(msg: Message, context: Context) -> Message:
    """ClientApp handler: run the pickled :class:`UpdateJob`, reply with its pickled
    :class:`CaseResult` or the one-line error."""
    job = pickle.loads(msg.content.config_records["job"][_KEY])
    try:
        out: CaseResult | str = run_update_job(job)
    except Exception as exc:  # noqa: BLE001 - the server writes it as the job's note
        out = job_error(exc)
    return Message(RecordDict({"result": ConfigRecord({_KEY: pickle.dumps(out)})}),
                   reply_to=msg)


class GridJobRunner:
    """An :data:`~fedaudit.audit.update_attacks.UpdateJobRunner` that sends every job through
    ``grid`` at once (round-robin over its nodes) and yields each result as its reply
    arrives; a job without a reply within ``timeout`` seconds of the first push (None, the
    run's choice: no limit, since a job's time grows with the budget; an actor that dies
    gets Flower's error reply) is an error."""

    #: where the jobs ran (results.json ``<family>.ran_on``)
    where = "the run's Ray actors (Flower's simulation grid)"
    #: the jobs run in other processes (the actors: their GPUs are
    #: ``federation.client_resources.num_gpus``)
    on_actors = True

    def __init__(self, grid: Grid, timeout: float | None = None) -> None:
        self.grid = grid
        self.timeout = timeout

    def __call__(self, jobs: Sequence[UpdateJob]) -> Iterator[tuple[int, CaseResult | str]]:
        if not jobs:
            return
        nodes = sorted(self.grid.get_node_ids())
        messages = [Message(RecordDict({"job": ConfigRecord({_KEY: pickle.dumps(job)})}),
                            nodes[i % len(nodes)], _MESSAGE_TYPE)
                    for i, job in enumerate(jobs)]
        ids = list(self.grid.push_messages(messages))
        position = {mid: i for i, mid in enumerate(ids) if mid}
        for i, mid in enumerate(ids):
            if not mid:
                yield i, "the grid did not accept the job's message"
        waiting = set(position)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while waiting:
            for reply in self.grid.pull_messages(list(waiting)):
                mid = reply.metadata.reply_to_message_id
                if mid not in waiting:
                    continue
                waiting.discard(mid)
                yield position[mid], _result(reply)
            if waiting and deadline is not None and time.monotonic() > deadline:
                for mid in sorted(waiting, key=position.get):
                    yield position[mid], f"no reply within {self.timeout:g} s"
                return
            if waiting:
                time.sleep(_POLL)


def _result(reply: Message) -> CaseResult | str:
    if reply.has_error():
        return f"the actor failed: {reply.error.reason}".splitlines()[0]
    return pickle.loads(reply.content.config_records["result"][_KEY])


def update_job_runner(scenario: Scenario, grid: Grid | None) -> UpdateJobRunner:
    """Where the run's update jobs go (``update_attacks.runtime``): ``grid`` (the run's
    Ray actors), ``driver`` (this process, one job after another), ``auto`` (grid in
    simulation, i.e. when ``grid`` is Flower's in-memory grid; driver when deployed)."""
    runtime = scenario.stages["update_attacks"]["runtime"]
    in_memory = grid is not None and hasattr(grid, "pull_interval")
    if runtime == "auto":
        runtime = "grid" if in_memory else "driver"
    if runtime == "grid" and not in_memory:
        if grid is not None:
            log.warning("update_attacks.runtime = 'grid' needs the simulation's grid "
                        "(a deployed SuperNode does not run the audit's jobs); running "
                        "them in the ServerApp's process")
        return run_in_process
    if runtime == "driver":
        return run_in_process
    return GridJobRunner(grid)
