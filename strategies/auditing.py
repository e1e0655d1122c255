"""The auditing strategy: a Flower Message-API strategy that wraps another one.

Like Flower's DP wrappers it delegates sampling and aggregation to the wrapped strategy
and adds behaviour around ``aggregate_train``:

1. rejects replies that carry an error, miss the model arrays or the metrics, or whose
   arrays differ in keys, shapes or dtypes from the global model, or hold non-finite
   values -- each with a logged reason, counted as a failure of the round;
2. notes the DP-SGD step counts every reply declares (``dp-steps``, ``dp-sample-rate``,
   rejected replies too: the server did receive them), from which the per-client epsilon
   is accounted;
3. sorts the valid replies by partition id, so the aggregate does not depend on the order
   in which replies arrived (floating-point sums are order-dependent);
4. hands each valid reply, as received, to every probe (:mod:`fedaudit.probes`: update
   norms and GNQ, the clients' GNQ reports and models, the DP audit's gradient canaries),
   before the wrapped strategy clips, noises or aggregates anything;
5. keeps the previous global model when fewer than ``min_clients`` replies are valid;
6. hands the round, aggregated, to every probe, then to ``on_round`` (evaluation,
   checkpoint, the probes' files and the rounds.jsonl line live there).

Wrapping a DP wrapper (``strategies.defenses``) keeps this strategy outermost: it validates
and records the replies as received and sees the released (noised) aggregate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from strategies import wire
from fedaudit.probes import AGGREGATE, Probe, Reply, RoundRecord, RoundView

log = logging.getLogger("fedaudit")

ARRAYS_KEY, METRICS_KEY, AUDIT_KEY = wire.ARRAYS, wire.METRICS, wire.AUDIT


@dataclass(frozen=True)
class ClientRound:
    """What one client contributed to one round (its reply's metrics)."""

    partition_id: int
    num_examples: int
    train_loss: float


@dataclass
class RoundAudit:
    round: int
    #: what the probes keep of the round (rounds.jsonl keys, files written)
    record: RoundRecord
    clients: list[ClientRound] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)  # {node_id, partition_id, reason}
    aggregated: bool = False
    note: str | None = None
    # dp-sgd: local steps and Poisson rate by partition id, from every reply that declares
    # them (rejected ones too: the server did receive that update -- conservative)
    dp_steps: dict[int, int] = field(default_factory=dict)
    dp_sample_rate: dict[int, float] = field(default_factory=dict)


def _decoded(arrays: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: arrays[k].numpy() for k in arrays.keys()}


class AuditingStrategy(Strategy):
    """Wrap ``strategy``; audit and record every training round.

    Parameters
    ----------
    strategy : the Flower strategy that samples clients and aggregates (e.g. FedAvg).
    on_round : called after each round with (round, new global arrays or None when the
        round kept the previous model, the round's :class:`RoundAudit`).
    probes : the run's probes (:class:`fedaudit.probes.Probe` instances), in the order they
        run.
    run_dir, subdir : where the probes keep their files (:class:`fedaudit.probes.RoundRecord`).
    min_clients : fewest valid replies needed to replace the global model.
    round_offset : rounds already finished before this ``start`` (resuming a run): Flower
        counts rounds from 1 in every ``start``, clients and records see the true round.
    modify : a malicious server's hand on the model it sends: ``modify(round, arrays)`` is
        what the clients get that round instead of ``arrays`` (and what the probes see as
        the round's start model); None for an honest server.
    """

    def __init__(self, strategy: Strategy, *,
                 on_round: Callable[[int, ArrayRecord | None, RoundAudit], None],
                 probes: Sequence[Probe] = (), run_dir: Path | str = ".", subdir: str = "",
                 min_clients: int = 1, round_offset: int = 0,
                 modify: Callable[[int, ArrayRecord], ArrayRecord] | None = None) -> None:
        self.strategy = strategy
        self.modify = modify
        self.probes = tuple(probes)
        self.run_dir, self.subdir = Path(run_dir), subdir
        self.round_offset = round_offset
        self.on_round = on_round
        self.min_clients = min_clients
        self._global: ArrayRecord | None = None

    def __repr__(self) -> str:
        return f"AuditingStrategy({self.strategy!r})"

    def summary(self) -> None:
        log.info("AuditingStrategy wrapping %s: min_clients=%d, probes: %s",
                 type(self.strategy).__name__, self.min_clients,
                 ", ".join(p.name for p in self.probes) or "none")
        self.strategy.summary()

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        if self.modify is not None:  # a malicious server's model for this round
            arrays = self.modify(server_round + self.round_offset, arrays)
        self._global = arrays
        return self.strategy.configure_train(server_round + self.round_offset, arrays, config,
                                             grid)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round + self.round_offset, arrays,
                                                config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round + self.round_offset, replies)

    # -- training ---------------------------------------------------------------------
    def check_reply(self, msg: Message) -> str | None:
        """Why a reply cannot be aggregated, or None when it can."""
        if msg.has_error():
            return f"client error: {msg.error.reason}"
        content = msg.content
        if ARRAYS_KEY not in content.array_records:
            return f"reply has no ArrayRecord {ARRAYS_KEY!r}"
        if METRICS_KEY not in content.metric_records:
            return f"reply has no MetricRecord {METRICS_KEY!r}"
        if len(content.array_records) != 1 or len(content.metric_records) != 1:
            return "reply must hold exactly one ArrayRecord and one MetricRecord"
        metrics = content.metric_records[METRICS_KEY]
        for key in (wire.NUM_EXAMPLES, wire.PARTITION_ID, wire.TRAIN_LOSS):
            if key not in metrics:
                return f"metrics lack {key!r}"
        n = metrics[wire.NUM_EXAMPLES]
        if isinstance(n, list) or not np.isfinite(n) or n <= 0:
            return f"num-examples = {n!r} must be a positive number"
        loss = metrics[wire.TRAIN_LOSS]
        if isinstance(loss, list) or not np.isfinite(loss):
            return f"train-loss = {loss!r} is not finite"
        arrays = content.array_records[ARRAYS_KEY]
        ref = self._global
        if ref is not None:
            if set(arrays.keys()) != set(ref.keys()):
                missing = sorted(set(ref.keys()) - set(arrays.keys()))
                extra = sorted(set(arrays.keys()) - set(ref.keys()))
                return f"array keys differ from the global model (missing {missing}, extra {extra})"
            for key in ref.keys():
                a, r = arrays[key], ref[key]
                if tuple(a.shape) != tuple(r.shape) or a.dtype != r.dtype:
                    return (f"array {key!r} is {a.dtype}{list(a.shape)}, expected "
                            f"{r.dtype}{list(r.shape)}")
        for key in arrays.keys():
            try:
                values = arrays[key].numpy()
            except Exception as exc:  # noqa: BLE001 - undecodable bytes from a client
                return f"array {key!r} cannot be decoded: {exc}"
            if np.issubdtype(values.dtype, np.floating) and not np.all(np.isfinite(values)):
                return f"array {key!r} holds non-finite values"
        return None

    @staticmethod
    def _note_dp(audit: RoundAudit, pid, metrics: MetricRecord) -> None:
        steps, rate = metrics.get(wire.DP_STEPS), metrics.get(wire.DP_SAMPLE_RATE)
        if pid is None or steps is None or rate is None:
            return
        try:
            pid, steps, rate = int(pid), int(steps), float(rate)
        except (TypeError, ValueError):
            return
        if steps > 0 and 0.0 < rate <= 1.0:
            audit.dp_steps[pid] = audit.dp_steps.get(pid, 0) + steps
            audit.dp_sample_rate[pid] = rate

    def _valid_replies(self, audit: RoundAudit,
                       replies: Iterable[Message]) -> list[tuple[int, Message]]:
        """The replies that can be aggregated, by partition id; each other one becomes a
        logged failure.  Every reply's DP-SGD step count is noted."""
        valid: list[tuple[int, Message]] = []
        for msg in replies:
            reason = self.check_reply(msg)
            pid = None
            if not msg.has_error() and METRICS_KEY in msg.content.metric_records:
                metrics = msg.content.metric_records[METRICS_KEY]
                pid = metrics.get(wire.PARTITION_ID)
                self._note_dp(audit, pid, metrics)
            if reason is not None:
                log.warning("round %d: rejected reply from node %s (partition %s): %s",
                            audit.round, msg.metadata.src_node_id, pid, reason)
                audit.failures.append({"node_id": int(msg.metadata.src_node_id),
                                       "partition_id": None if pid is None else int(pid),
                                       "reason": reason})
            else:
                valid.append((int(pid), msg))
        valid.sort(key=lambda item: item[0])
        return valid

    def _reply(self, round_: int, pid: int, msg: Message,
               start: dict[str, np.ndarray]) -> Reply:
        """The probes' view of a valid reply (its arrays decoded once)."""
        content = msg.content
        metrics = content.metric_records[METRICS_KEY]
        records = (dict(content.config_records[AUDIT_KEY]) if AUDIT_KEY in content.config_records
                   else {})
        return Reply(round=round_, client=pid, num_examples=int(metrics[wire.NUM_EXAMPLES]),
                     train_loss=float(metrics[wire.TRAIN_LOSS]),
                     model=_decoded(content.array_records[ARRAYS_KEY]), start=start,
                     records=records)

    def _aggregate(self, audit: RoundAudit, valid: list[Message]
                   ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The wrapped strategy's aggregate of ``valid``, or (None, None) -- keeping the
        previous model -- with fewer than ``min_clients``."""
        if len(valid) < self.min_clients:
            audit.note = (f"only {len(valid)} valid replies (< federation.min_clients = "
                          f"{self.min_clients}); kept the previous global model")
            log.warning("round %d: %s", audit.round, audit.note)
            return None, None
        arrays, metrics = self.strategy.aggregate_train(audit.round, valid)
        audit.aggregated = arrays is not None
        if arrays is None:
            audit.note = "the wrapped strategy returned no aggregate; kept the previous model"
        return arrays, metrics

    def aggregate_train(self, server_round: int, replies: Iterable[Message], *,
                        secure: bool = False) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """``secure``: the replies are secure aggregation's stand-ins (each holds the
        aggregate and its client's metrics, :mod:`strategies.secure_aggregation`): they
        are validated and aggregated, but no probe sees them as a client's update."""
        server_round += self.round_offset
        audit = RoundAudit(server_round, RoundRecord(self.run_dir, server_round, self.subdir))
        valid = self._valid_replies(audit, replies)
        start = _decoded(self._global) if self._global is not None else {}
        seen = tuple(self._reply(server_round, pid, msg, start) for pid, msg in valid)
        for reply in seen:
            audit.clients.append(ClientRound(reply.client, reply.num_examples,
                                             reply.train_loss))
            for probe in () if secure else self.probes:
                probe.on_reply(reply, audit.record)
        if secure:
            seen = ()
        arrays, metrics = self._aggregate(audit, [msg for _, msg in valid])
        wanted = arrays is not None and any(AGGREGATE in p.reads for p in self.probes)
        view = RoundView(server_round, seen, _decoded(arrays) if wanted else None)
        for probe in self.probes:
            probe.on_round(view, audit.record)
        self.on_round(server_round, arrays, audit)
        return arrays, metrics
