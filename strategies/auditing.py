"""The auditing strategy: a Flower Message-API strategy that wraps another one.

Like Flower's DP wrappers it delegates sampling and aggregation to the wrapped strategy
and adds behaviour around ``aggregate_train``:

1. rejects replies that carry an error, miss the model arrays or the metrics, or whose
   arrays differ in keys, shapes or dtypes from the global model, or hold non-finite
   values -- each with a logged reason, counted as a failure of the round;
2. sorts the valid replies by partition id, so the aggregate does not depend on the order
   in which replies arrived (floating-point sums are order-dependent);
3. scores each client's update u_c = w_c - w_global with server-side GNQ against the
   round's other updates (batch space, docs/algorithms.md section 1);
4. keeps the previous global model when fewer than ``min_clients`` replies are valid;
5. with a ``canary_probe`` (the DP audit's white-box gradient canaries), reads each valid
   update at its client's canary coordinates -- the server's view the audit scores;
6. hands every round to ``on_round`` (evaluation, checkpoint, rounds.jsonl live there),
   with the DP-SGD step counts the replies declare (``dp-steps``, ``dp-sample-rate``),
   from which the per-client epsilon is accounted.

Wrapping a DP wrapper (``strategies.defenses``) keeps this strategy outermost: it validates
and records the replies as received and sees the released (noised) aggregate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from strategies import wire
from fedaudit.scenario import GnqConfig

log = logging.getLogger("fedaudit")

ARRAYS_KEY, METRICS_KEY, AUDIT_KEY = wire.ARRAYS, wire.METRICS, wire.AUDIT


@dataclass
class ClientRound:
    """What one client contributed to one round."""

    partition_id: int
    num_examples: int
    train_loss: float
    update_norm: float
    gnq_update: float | None = None
    gnq_ids: np.ndarray | None = None
    gnq_scores: np.ndarray | None = None
    gnq_epochs: np.ndarray | None = None  # local epoch (1-based) of each score
    #: the client's local model as the server received it (only with keep_client_models)
    state: dict | None = None
    #: the DP audit's gradient canaries of this client: their ids and the update there
    canary_ids: np.ndarray | None = None
    canary_values: np.ndarray | None = None


@dataclass
class RoundAudit:
    round: int
    clients: list[ClientRound] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)  # {node_id, partition_id, reason}
    aggregated: bool = False
    note: str | None = None
    # dp-sgd: local steps and Poisson rate by partition id, from every reply that declares
    # them (rejected ones too: the server did receive that update -- conservative)
    dp_steps: dict[int, int] = field(default_factory=dict)
    dp_sample_rate: dict[int, float] = field(default_factory=dict)


def _flat(arrays: ArrayRecord, keys: list[str]) -> np.ndarray:
    return np.concatenate([arrays[k].numpy().astype(np.float64, copy=False).ravel()
                           for k in keys])


class AuditingStrategy(Strategy):
    """Wrap ``strategy``; audit and record every training round.

    Parameters
    ----------
    strategy : the Flower strategy that samples clients and aggregates (e.g. FedAvg).
    on_round : called after each round with (round, new global arrays or None when the
        round kept the previous model, the round's :class:`RoundAudit`).
    gnq_server : GNQ options (``lam``, ``lam_mode``, ``rho``) or None to skip update GNQ.
    min_clients : fewest valid replies needed to replace the global model.
    round_offset : rounds already finished before this ``start`` (resuming a run): Flower
        counts rounds from 1 in every ``start``, clients and records see the true round.
    keep_client_models : hand each valid reply's model (as received, before the wrapped
        strategy clips or noises anything) to ``on_round`` in ``ClientRound.state`` -- the
        curious server's view (:mod:`fedaudit.audit.targets.client_models`).
    canary_probe : called with (partition id, the update by state_dict key) for each valid
        reply; returns (canary ids, values) kept in ``ClientRound.canary_ids`` /
        ``canary_values`` (:class:`fedaudit.dp_audit.gradient.UpdateProbe`).
    """

    def __init__(self, strategy: Strategy, *,
                 on_round: Callable[[int, ArrayRecord | None, RoundAudit], None],
                 gnq_server: GnqConfig | None = None, min_clients: int = 1,
                 round_offset: int = 0, keep_client_models: bool = False,
                 canary_probe: Callable[[int, dict[str, np.ndarray]],
                                        tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        self.strategy = strategy
        self.canary_probe = canary_probe
        self.keep_client_models = keep_client_models
        self.round_offset = round_offset
        self.on_round = on_round
        self.gnq_server = gnq_server
        self.min_clients = min_clients
        self._global: ArrayRecord | None = None

    def __repr__(self) -> str:
        return f"AuditingStrategy({self.strategy!r})"

    def summary(self) -> None:
        log.info("AuditingStrategy wrapping %s: min_clients=%d, server GNQ %s",
                 type(self.strategy).__name__, self.min_clients,
                 "on" if self.gnq_server else "off")
        self.strategy.summary()

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
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

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        server_round += self.round_offset
        audit = RoundAudit(round=server_round)
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
                            server_round, msg.metadata.src_node_id, pid, reason)
                audit.failures.append({"node_id": int(msg.metadata.src_node_id),
                                       "partition_id": None if pid is None else int(pid),
                                       "reason": reason})
            else:
                valid.append((int(pid), msg))
        valid.sort(key=lambda item: item[0])
        keys = list(self._global.keys()) if self._global is not None else []
        updates = []
        for pid, msg in valid:
            content = msg.content
            metrics = content.metric_records[METRICS_KEY]
            record = ClientRound(partition_id=pid, num_examples=int(metrics[wire.NUM_EXAMPLES]),
                                 train_loss=float(metrics[wire.TRAIN_LOSS]), update_norm=float("nan"))
            if AUDIT_KEY in content.config_records:
                cfg = content.config_records[AUDIT_KEY]
                if wire.GNQ_IDS in cfg:
                    record.gnq_ids = np.asarray(cfg[wire.GNQ_IDS], dtype=np.int64)
                    record.gnq_scores = np.asarray(cfg[wire.GNQ_SCORES], dtype=np.float64)
                    if wire.GNQ_EPOCHS in cfg:
                        record.gnq_epochs = np.asarray(cfg[wire.GNQ_EPOCHS], dtype=np.int64)
            if self.keep_client_models:
                record.state = content.array_records[ARRAYS_KEY].to_torch_state_dict()
            if self.canary_probe is not None and keys:
                sent = content.array_records[ARRAYS_KEY]
                record.canary_ids, record.canary_values = self.canary_probe(pid, {
                    k: sent[k].numpy().astype(np.float64) - self._global[k].numpy()
                    .astype(np.float64) for k in keys})
            if keys:
                u = _flat(content.array_records[ARRAYS_KEY], keys) - _flat(self._global, keys)
                record.update_norm = float(np.linalg.norm(u))
                updates.append(u)
            audit.clients.append(record)
        if self.gnq_server is not None and len(updates) >= 2:
            from fedaudit.gnq import gnq_of_updates

            scores = gnq_of_updates(np.stack(updates), lam=self.gnq_server.lam,
                                    lam_mode=self.gnq_server.lam_mode,
                                    rho=self.gnq_server.rho)
            for record, s in zip(audit.clients, np.asarray(scores, dtype=np.float64)):
                record.gnq_update = float(s)

        arrays = metrics_out = None
        if len(valid) >= self.min_clients:
            arrays, metrics_out = self.strategy.aggregate_train(server_round,
                                                                [m for _, m in valid])
            audit.aggregated = arrays is not None
            if arrays is None:
                audit.note = "the wrapped strategy returned no aggregate; kept the previous model"
        else:
            audit.note = (f"only {len(valid)} valid replies (< federation.min_clients = "
                          f"{self.min_clients}); kept the previous global model")
            log.warning("round %d: %s", server_round, audit.note)
        self.on_round(server_round, arrays, audit)
        return arrays, metrics_out
