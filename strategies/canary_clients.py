"""Canary clients of the client-level one-run DP audit (``[audit.dp]`` at the client
level, :mod:`fedaudit.dp_audit`), planted where the defenses wrap the strategy.

The stack under ``dp-server`` / ``dp-client`` / ``clip`` with the audit on::

    AuditingStrategy            validates and records the REAL clients' replies
      -> CanaryClientsStrategy  adds one reply per included canary client
        -> DP wrapper           clips, averages (uniform weights), adds noise
          -> FedAvg, as :func:`with_canary_slots` subclasses it

:class:`CanaryClientsStrategy`:

1. remembers the global model each round sends out (``configure_train``);
2. in ``aggregate_train``, when the round has at least one real reply, appends for every
   included canary j a reply whose model is global + clip_norm * u_j on the floating-point
   entries (u_j: :func:`fedaudit.dp_audit.canaries.canary_direction`), with the first real
   reply's metrics (so FedAvg's metric aggregation sees consistent keys) and
   ``partition-id`` = -(j + 1);
3. drops from ``configure_train`` the placeholder messages the FedAvg subclass of
   :func:`with_canary_slots` adds for the canaries: Flower's DP wrapper checks that it
   configured exactly ``num_sampled_clients`` messages, the sampled clients plus the
   canaries, while only the real clients are sent one;
4. delegates everything else to the wrapped strategy (also attributes such as the DP
   wrapper's ``privacy_spent``).

The canaries take part in every round (their coin is drawn once per run), so the wrapper
below is built for ``sampled + included`` replies per round: the noise std
sigma * clip / (sampled + included) is the wrapper's calibration for that many clipped
updates, and the accountant's guarantee (one Gaussian release per round, no
amplification) is unchanged.  The recorder, rounds.jsonl and the attacks never see the
canaries; the train-loss FedAvg aggregates does (it counts them like clients).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from flwr.app import (Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord,
                      RecordDict)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from strategies import wire
from fedaudit.dp_audit.canaries import canary_direction


#: config key marking a placeholder message of a canary client (never sent)
CANARY_SLOT = "fedaudit-canary-slot"


def _is_slot(msg: Message) -> bool:
    return any(CANARY_SLOT in rec for rec in msg.content.config_records.values())


def with_canary_slots(cls: type[Strategy], k: int) -> type[Strategy]:
    """A subclass of the strategy ``cls`` whose ``configure_train`` also returns ``k``
    placeholder messages (one per included canary client) when it samples anyone.  A
    subclass, not a wrapper: Flower's DP wrappers with an accountant require
    ``FedAvg.aggregate_train`` itself, which the subclass keeps."""

    class WithCanarySlots(cls):  # type: ignore[valid-type, misc]
        def configure_train(self, server_round, arrays, config, grid):
            msgs = list(super().configure_train(server_round, arrays, config, grid))
            if not msgs:
                return msgs
            return msgs + [Message(content=RecordDict({"config": ConfigRecord({CANARY_SLOT: j})}),
                                   dst_node_id=0, message_type=MessageType.TRAIN)
                           for j in range(k)]

    WithCanarySlots.__name__ = f"{cls.__name__}WithCanarySlots"
    return WithCanarySlots


class CanaryClientsStrategy(Strategy):
    """Wrap ``strategy``; add the included canary clients' replies to every round."""

    def __init__(self, strategy: Strategy, *, included: np.ndarray, clip_norm: float,
                 seed: int) -> None:
        self.strategy = strategy
        self.included = np.flatnonzero(np.asarray(included, dtype=bool))
        self.clip_norm = float(clip_norm)
        self.seed = seed
        self._global: ArrayRecord | None = None

    def __getattr__(self, name: str):
        if name == "strategy":  # not yet set (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.strategy, name)

    def summary(self) -> None:
        self.strategy.summary()

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._global = arrays
        return [m for m in self.strategy.configure_train(server_round, arrays, config, grid)
                if not _is_slot(m)]

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int,
                           replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def canary_arrays(self, j: int) -> ArrayRecord:
        """global + clip_norm * u_j on the floating-point entries (key order of the global
        model; integer entries such as BatchNorm's counters unchanged)."""
        assert self._global is not None
        arrays = {k: self._global[k].numpy() for k in self._global.keys()}
        floats = [k for k, a in arrays.items() if np.issubdtype(a.dtype, np.floating)]
        dim = sum(arrays[k].size for k in floats)
        u = canary_direction(self.seed, j, dim) * self.clip_norm
        out, pos = {}, 0
        for k, a in arrays.items():
            if k in floats:
                step = u[pos:pos + a.size].reshape(a.shape)
                pos += a.size
                a = (a.astype(np.float64) + step).astype(a.dtype)
            out[k] = Array(np.ascontiguousarray(a))
        return ArrayRecord(out)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        if replies and self._global is not None and len(self.included):
            template = replies[0].content.metric_records[wire.METRICS]
            for j in self.included:
                metrics = MetricRecord({**dict(template), wire.PARTITION_ID: -(int(j) + 1)})
                out = Message(content=RecordDict({"config": ConfigRecord({})}),
                              dst_node_id=0, message_type=MessageType.TRAIN)
                replies.append(Message(content=RecordDict({
                    wire.ARRAYS: self.canary_arrays(int(j)), wire.METRICS: metrics}),
                    reply_to=out))
        return self.strategy.aggregate_train(server_round, replies)
