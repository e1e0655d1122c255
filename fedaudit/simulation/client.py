"""The ClientApp: local training (with in-run GNQ when enabled) on the client's partition.

Each client rebuilds the scenario's data deterministically from the scenario text the
server sends, so no dataset travels in messages; the node's ``partition-id`` picks its
share. A client actor (one Ray worker process, reused across rounds) keeps the parsed
scenario, its data and a built model in :data:`_WORKSPACES`, keyed by the scenario text and
the training seed, so from round 2 on a round only loads the global weights into the
kept model (whose every parameter and buffer ``load_state_dict`` overwrites: results are
those of a fresh model).

Defenses (``[defense]``): ``dp-sgd`` trains with Opacus DP-SGD and reports its step count
and sampling rate (``dp-steps``, ``dp-sample-rate``) for the server's accounting; under
``dp-server`` / ``dp-client`` / ``clip`` every reply carries ``dp-weight = 1`` (uniform
FedAvg weights); ``dp-client`` clips the update here, through Flower's
``fixedclipping_mod`` run by :func:`strategies.defenses.clip_when_asked_mod` whenever the
server's train config carries ``clipping_norm``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedaudit.config import from_toml
from strategies import wire
from fedaudit.data import FederatedData, build_federated_data
from fedaudit.servers import served_model
from fedaudit.scenario import FaultsConfig, Scenario
from fedaudit.dp_audit.gradient import canaries_for_model
from fedaudit.dp_audit.levels import planted_level
from fedaudit.training import client_seed, pick_device, train_local
from fedaudit.defenses import get_defense
from strategies.defenses import clip_when_asked_mod
from strategies.secure_aggregation import secagg_when_asked_mod



class InjectedFault(RuntimeError):
    """A failure injected by ``[faults]`` (labs and tests of the server's robustness)."""


def draw_faults(faults: FaultsConfig, server_round: int, partition_id: int) -> tuple[bool, bool]:
    """(crash, nan) for this client and round; reproducible from ``faults.seed``."""
    u = np.random.default_rng([faults.seed, server_round, partition_id, 104729]).random(2)
    return bool(u[0] < faults.crash_rate), bool(u[1] < faults.nan_rate)


@dataclass
class Workspace:
    """What a client actor keeps across rounds for one (scenario text, training seed)."""

    scenario: Scenario
    data: FederatedData
    model: nn.Module


#: (scenario text, training seed or None) -> Workspace; a few entries per actor process
_WORKSPACES: dict[tuple[str, int | None], Workspace] = {}
_MAX_WORKSPACES = 4


def workspace(scenario_text: str, train_seed: int | None, *,
              any_seed: bool = False) -> Workspace:
    """The parsed scenario, its data and a model, built once per actor and key; with
    ``any_seed`` (a reference federation's client: the weights come with the message) any
    workspace of the same scenario text."""
    key = (scenario_text, train_seed)
    ws = _WORKSPACES.get(key)
    if ws is None and any_seed:
        ws = next((w for (text, _), w in _WORKSPACES.items() if text == scenario_text), None)
    if ws is None:
        scenario = from_toml(scenario_text, "scenario from server")
        data = build_federated_data(scenario)
        seed = scenario.seed if train_seed is None else train_seed
        ws = Workspace(scenario, data, served_model(scenario, data, seed=seed))
        while len(_WORKSPACES) >= _MAX_WORKSPACES:
            _WORKSPACES.pop(next(iter(_WORKSPACES)))  # oldest first
        _WORKSPACES[key] = ws
    return ws


def train(msg: Message, context: Context) -> Message:
    config = msg.content[wire.CONFIG]
    reference = wire.REFERENCE_IDS in config
    # the training seed differs from the scenario seed for the extra runs behind r_Qn
    # ([audit.quantization] seeds, one estimate per run) and for the auditor's reference
    # federations (whose clients only need the data: the weights come with the message)
    ws = workspace(str(config[wire.SCENARIO]),
                   int(config[wire.TRAIN_SEED]) if wire.TRAIN_SEED in config and not reference
                   else None, any_seed=reference)
    scenario, data = ws.scenario, ws.data
    server_round = int(config[wire.SERVER_ROUND])
    nan = False
    if reference:  # a client of a reference federation: its ids, no faults, no GNQ
        partition_id = int(config[wire.REFERENCE_CLIENT])
        ids = np.asarray(config[wire.REFERENCE_IDS], dtype=np.int64)
    else:
        partition_id = int(context.node_config[wire.PARTITION_ID])
        ids = data.clients[partition_id]
        crash, nan = draw_faults(scenario.faults, server_round, partition_id)
        if crash:
            raise InjectedFault(f"[faults] crash of client {partition_id} in round {server_round}")
    train_seed = int(config[wire.TRAIN_SEED]) if wire.TRAIN_SEED in config else scenario.seed
    seed = client_seed(train_seed, server_round, partition_id)
    torch.manual_seed(seed)
    threads = scenario.federation.client_resources.num_cpus
    torch.set_num_threads(max(1, int(threads)))

    model = ws.model
    start = msg.content[wire.ARRAYS].to_torch_state_dict()
    model.load_state_dict(start)
    gnq = scenario.audit.gnq
    defense = get_defense(scenario.defense.kind)
    level = planted_level(scenario.audit.dp)
    canaries = None
    if level is not None and level.plants_gradients and not reference:
        # white-box canaries in this client's DP-SGD (never in the auditor's references)
        canaries = canaries_for_model(scenario.audit.dp.canaries, model,
                                      scenario.federation.num_clients,
                                      scenario.seed)[0].of_client(partition_id)
    result = train_local(model, data.x, data.y, ids, scenario.train,
                         seed=seed, device=pick_device(scenario.train.device),
                         gnq=gnq if gnq.client and not reference else None,
                         dp=defense.local_dp(scenario.defense), dp_canaries=canaries)
    state = defense.client_update(scenario.defense, start, model.cpu().state_dict())
    if nan:
        state = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                 for k, v in state.items()}
    values = {wire.NUM_EXAMPLES: result.num_examples, wire.TRAIN_LOSS: result.loss,
              wire.PARTITION_ID: partition_id}
    if result.dp_steps:
        values.update({wire.DP_STEPS: result.dp_steps, wire.DP_SAMPLE_RATE: result.dp_sample_rate})
    if defense.uniform_weights:
        values[wire.UNIT_WEIGHT] = 1
    metrics = MetricRecord(values)
    content = RecordDict({wire.ARRAYS: ArrayRecord(state), wire.METRICS: metrics})
    if gnq.client and len(result.gnq_ids):
        content[wire.AUDIT] = ConfigRecord({wire.GNQ_IDS: result.gnq_ids.tolist(),
                                           wire.GNQ_SCORES: result.gnq_scores.tolist(),
                                           wire.GNQ_EPOCHS: result.gnq_epochs.tolist()})
    return Message(content=content, reply_to=msg)


class FedauditClientApp(ClientApp):
    """fedaudit's ClientApp; it pickles as "build it again from these mods".

    Flower's Ray backend sends the ClientApp with every client call (a closure around it,
    through Ray's cloudpickle).  A plain ClientApp instance pickles by value with the
    closures Flower's decorators made: 80 kB and 10 ms of the driver's time per
    client-round on the quickstart (bench/sim.py).  Rebuilt from its mods, only
    ``extra_mods`` travel (the plug-ins' entries, :mod:`fedaudit.simulation.plugins`).
    With ``audit_jobs`` it also runs the audit's attacks on updates
    (:mod:`fedaudit.simulation.update_attack_jobs`: the simulation's app only).
    """

    def __init__(self, extra_mods: list | tuple = (), audit_jobs: bool = False) -> None:
        self.extra_mods = tuple(extra_mods)
        self.audit_jobs = audit_jobs
        super().__init__(mods=[*self.extra_mods, secagg_when_asked_mod, clip_when_asked_mod])
        self.train()(train)
        if audit_jobs:
            from fedaudit.simulation.update_attack_jobs import ACTION, attack_update

            self.query(ACTION)(attack_update)

    def __reduce__(self) -> tuple:
        # only what __init__ registers travels: a handler added to the app later would not
        return make_client_app, (self.extra_mods, self.audit_jobs)


def make_client_app(extra_mods: list | tuple = (), audit_jobs: bool = False) -> ClientApp:
    """The ClientApp: :func:`train` behind ``extra_mods`` (first) and the defenses' mod;
    with ``audit_jobs`` the handler of the audit's update jobs as well (simulation only)."""
    return FedauditClientApp(extra_mods, audit_jobs)


client_app = make_client_app()
#: the ClientApp of ``fedaudit run`` (Flower's simulation on Ray): also runs the audit's jobs
simulation_client_app = make_client_app(audit_jobs=True)
