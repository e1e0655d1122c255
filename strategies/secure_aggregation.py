"""Rounds through Flower's SecAgg+ (``federation.aggregation = "secagg+"``).

Flower ships SecAgg+ as a workflow of its legacy server API
(``flwr.server.workflow.SecAggPlusWorkflow``, which drives a legacy ``Strategy`` through a
``LegacyContext``) and a client mod (``flwr.client.mod.secaggplus_mod``); its Message-API
strategies have no secure aggregation.  This module is the bridge, and only a bridge: the
protocol (key agreement, secret sharing, masking, quantisation, unmasking) is Flower's.

Server (:func:`run_secagg_rounds`), each round:

1. the auditing strategy's ``configure_train`` samples the clients and builds their
   train messages exactly as in a plain round (FedAvg's sampling, the client-side DP
   wrapper's ``clipping_norm``, and the model each client gets: a malicious server's
   modified model included -- :class:`_OneRound` sends each client its message's arrays,
   not the workflow's global parameters);
2. ``SecAggPlusWorkflow`` runs the four stages with those clients through a one-round
   legacy strategy (:class:`_OneRound`);
3. Flower hands that strategy every client's ``FitRes`` with the unmasked aggregate in
   place of its parameters (its own backward-compatibility path) and the client's
   metrics; they become stand-in replies for the auditing strategy's ``aggregate_train``
   (``secure=True``: no probe sees them as a client's update), whose wrapped strategy
   averages identical arrays (the aggregate) and, under central DP, adds the noise.

Clients (:func:`secagg_when_asked_mod`): SecAgg+'s train messages go through
``secaggplus_mod``; its fit stage carries Flower's legacy ``FitIns`` content, which is
translated to fedaudit's train message and the reply back to a ``FitRes`` whose weight is
the client's ``num-examples`` (under uniform weights, ``dp-weight``, every client sends
``max_weight``: equal weights at SecAgg+'s finest quantisation).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import numpy as np
from flwr.app import (Array, ArrayRecord, ConfigRecord, Context, Error, Message, MessageType,
                      MetricRecord, RecordDict)
from flwr.server.strategy import Strategy as LegacyStrategy

from strategies import wire

log = logging.getLogger("fedaudit")

__all__ = ["KEYS", "UNIT", "run_secagg_rounds", "secagg_when_asked_mod"]

#: config key of the model's array names (legacy parameters are an unnamed list)
KEYS = "fedaudit-array-keys"
#: config key of the weight a client sends under uniform weights (``dp-weight``): SecAgg+'s
#: ``max_weight``, the finest quantisation (the weighted model is what gets quantised)
UNIT = "fedaudit-unit-weight"


@contextlib.contextmanager
def _numpy_seeded(seed: int) -> Iterator[None]:
    """secaggplus_mod quantises with stochastic rounding from numpy's GLOBAL generator:
    seed it for the call, restore it after (the DP wrappers' noise does the same)."""
    state = np.random.get_state()
    np.random.seed(seed % 2 ** 32)
    try:
        yield
    finally:
        np.random.set_state(state)


def secagg_when_asked_mod(msg: Message, ctxt: Context, call_next) -> Message:
    """ClientApp mod: Flower's ``secaggplus_mod`` on train messages of the SecAgg+
    protocol (they carry its config record); every other message passes through
    (``secaggplus_mod`` itself fails on those)."""
    from flwr.client.mod import secaggplus_mod
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key, Stage

    if msg.metadata.message_type != MessageType.TRAIN \
            or RECORD_KEY_CONFIGS not in msg.content.config_records:
        return call_next(msg, ctxt)
    if msg.content.config_records[RECORD_KEY_CONFIGS].get(Key.STAGE) \
            != Stage.COLLECT_MASKED_VECTORS:
        return secaggplus_mod(msg, ctxt, call_next)

    import flwr.compat.common.recorddict_compat as compat
    from fedaudit.training import client_seed

    fitins = compat.recorddict_to_fitins(msg.content, keep_input=True)
    config = dict(fitins.config)
    keys = str(config.pop(KEYS)).split("\n")
    unit = int(config.pop(UNIT))

    def fit(legacy: Message, context: Context) -> Message:
        from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays

        values = parameters_to_ndarrays(fitins.parameters)
        legacy.content = RecordDict({
            wire.ARRAYS: ArrayRecord({k: Array(v) for k, v in zip(keys, values, strict=True)}),
            wire.CONFIG: ConfigRecord(config)})
        reply = call_next(legacy, context)
        if reply.has_error():
            return reply
        got = reply.content[wire.ARRAYS]
        metrics = dict(reply.content[wire.METRICS])
        weight = unit if wire.UNIT_WEIGHT in metrics else int(metrics[wire.NUM_EXAMPLES])
        fitres = FitRes(Status(Code.OK, ""),
                        ndarrays_to_parameters([got[k].numpy() for k in keys]),
                        weight, metrics)
        return Message(compat.fitres_to_recorddict(fitres, keep_input=True), reply_to=legacy)

    seed = client_seed(int(config[wire.TRAIN_SEED]), int(config[wire.SERVER_ROUND]),
                       int(ctxt.node_config[wire.PARTITION_ID]))
    with _numpy_seeded(seed):
        return secaggplus_mod(msg, ctxt, fit)


class _OneRound(LegacyStrategy):
    """The legacy ``Strategy`` SecAggPlusWorkflow drives for one round: the clients and
    configs the auditing strategy chose, and the aggregate handed back to it."""

    def __init__(self, grid, messages: list[Message], keys: list[str], unit: int,
                 auditing, server_round: int) -> None:
        self.grid, self.messages, self.keys, self.unit = grid, messages, keys, unit
        self.auditing, self.server_round = auditing, server_round
        self.result: tuple[ArrayRecord | None, MetricRecord | None] | None = None

    def initialize_parameters(self, client_manager):
        return None

    def configure_fit(self, server_round, parameters, client_manager):
        """Each sampled client's ``FitIns``: the arrays and config of the message the
        auditing strategy built for it -- the model the server sends, which a malicious
        server modifies (:meth:`strategies.auditing.AuditingStrategy.configure_train`);
        the workflow's ``parameters`` are the unmodified global model."""
        from flwr.common import FitIns, ndarrays_to_parameters
        from flwr.server.compat.grid_client_proxy import GridClientProxy

        run_id = getattr(getattr(self.grid, "run", None), "run_id", 0)
        out = []
        for m in self.messages:
            config = {**dict(m.content[wire.CONFIG]), KEYS: "\n".join(self.keys),
                      UNIT: self.unit}
            sent = m.content[wire.ARRAYS]
            out.append((GridClientProxy(m.metadata.dst_node_id, self.grid, run_id),
                        FitIns(ndarrays_to_parameters([sent[k].numpy() for k in self.keys]),
                               config)))
        return out

    def aggregate_fit(self, server_round, results, failures):
        from flwr.common import parameters_to_ndarrays

        dtypes = {k: a.numpy().dtype for k, a in self.messages[0].content[wire.ARRAYS].items()}
        stand_ins = []
        for proxy, fitres in results:  # each holds the aggregate and the client's metrics
            # SecAgg+ dequantises in float64: back to the model's dtypes
            values = [v.astype(dtypes[k], copy=False) for k, v in
                      zip(self.keys, parameters_to_ndarrays(fitres.parameters), strict=True)]
            content = RecordDict({
                wire.ARRAYS: ArrayRecord({k: Array(v) for k, v in zip(self.keys, values,
                                                                       strict=True)}),
                wire.METRICS: MetricRecord(dict(fitres.metrics))})
            stand_ins.append(Message(content, dst_node_id=int(proxy.node_id),
                                     message_type=MessageType.TRAIN))
        reason = (f"dropped out of SecAgg+ ({str(failures[0]).splitlines()[0]})" if failures
                  else "dropped out of SecAgg+")
        got = {int(proxy.node_id) for proxy, _ in results}
        self.result = self.auditing.aggregate_train(
            self.server_round, [*stand_ins, *self.dropped(got, reason)], secure=True)
        return None, {}

    def dropped(self, received: set[int], reason: str) -> list[Message]:
        """An error reply for each sampled client whose model is not in the aggregate:
        the auditing strategy counts it as the round's failure, as in a plain round."""
        return [Message(Error(code=0, reason=reason), reply_to=m) for m in self.messages
                if int(m.metadata.dst_node_id) not in received]

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        return None


def run_secagg_rounds(grid, auditing, *, initial_arrays: ArrayRecord, num_rounds: int,
                      train_config: ConfigRecord, secagg, timeout: float | None) -> None:
    """``num_rounds`` rounds of the auditing strategy with Flower's SecAgg+ as the
    aggregation (module docstring); ``secagg`` is the scenario's
    :class:`fedaudit.scenario.SecAggConfig`.  A round that SecAgg+ halts (too few clients
    left above the reconstruction threshold) keeps the previous model, as a plain round
    with too few replies does."""
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.workflow import SecAggPlusWorkflow
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
    from flwr.server.workflow.constant import Key as WorkflowKey

    workflow = SecAggPlusWorkflow(
        num_shares=secagg.num_shares, reconstruction_threshold=secagg.reconstruction_threshold,
        max_weight=secagg.max_weight, clipping_range=secagg.clipping_range,
        quantization_range=secagg.quantization_range, modulus_range=secagg.modulus_range,
        timeout=timeout)
    keys = list(initial_arrays.keys())
    arrays = initial_arrays
    for server_round in range(1, num_rounds + 1):
        messages = list(auditing.configure_train(server_round, arrays, train_config, grid))
        one = _OneRound(grid, messages, keys, int(secagg.max_weight), auditing, server_round)
        context = LegacyContext(Context(run_id=0, node_id=0, node_config={},
                                        state=RecordDict(), run_config={}),
                                strategy=one, client_manager=SimpleClientManager())
        context.state.array_records[MAIN_PARAMS_RECORD] = arrays
        context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord(
            {WorkflowKey.CURRENT_ROUND: server_round})
        workflow(grid, context)
        if one.result is None:  # Flower logged why (too few clients for the threshold)
            log.warning("round %d: SecAgg+ halted before the aggregate; the round keeps the "
                        "previous model", server_round)
            one.result = auditing.aggregate_train(
                server_round, one.dropped(set(), "SecAgg+ halted before the aggregate"),
                secure=True)
        if one.result[0] is not None:
            arrays = one.result[0]
