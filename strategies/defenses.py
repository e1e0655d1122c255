"""Defenses of the ``[defense]`` section on the Flower side.

The stack a run builds (``fedaudit.simulation.strategy_factory.make_strategy``)::

    AuditingStrategy            validates, sorts and records every reply, server GNQ,
      -> DP wrapper             Flower's DifferentialPrivacy{Server,Client}SideFixedClipping
        -> FedAvg (or the scenario's strategy), uniform client weights

so the auditing strategy still sees every reply and evaluates (and checkpoints) the
released, noised model.  Consequence: under ``dp-server`` / ``clip`` the server-side update
GNQ and the update norms in rounds.jsonl are those of the updates AS RECEIVED, before the
wrapper clips them; under ``dp-client`` they are the client-clipped updates.

* ``dp-server``: :class:`SeededServerSideFixedClipping` -- Flower's server-side fixed
  clipping wrapper (clip every update to ``clip_norm``, aggregate, add
  N(0, (noise_multiplier * clip_norm / m)^2) per coordinate, m = sampled clients).
* ``dp-client``: :class:`SeededClientSideFixedClipping` -- Flower's client-side wrapper; it
  puts ``clipping_norm`` into the train config and the ClientApp's
  :func:`clip_when_asked_mod` runs Flower's ``fixedclipping_mod`` on those messages.
* ``clip``: Flower's server-side fixed clipping wrapper with ``noise_multiplier = 0``
  (clipping only; the zero-std noise it adds is exactly zero).

Both subclasses only seed the noise: Flower draws it from numpy's GLOBAL generator, so
``aggregate_train`` runs with that generator seeded from (training seed, round) and
restores its previous state afterwards -- the same scenario and seed give the same
numbers.  With noise, the wrappers get an accountant (:class:`OpacusGaussianAccountant`,
Flower's ``PrivacyAccountant`` protocol, no amplification), which also switches Flower's
checks on: FedAvg's own ``aggregate_train``, equal client weights, and a round that lacks
some sampled client's reply releases nothing (Flower's strict mode).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MessageType, MetricRecord
from flwr.serverapp.strategy import (DifferentialPrivacyClientSideFixedClipping,
                                     DifferentialPrivacyServerSideFixedClipping, Strategy)
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM
from flwr.supercore.privacy_accounting import (GaussianPrivacyEvent, NeighboringRelation,
                                               PrivacyConfig, PrivacySpent, SamplingMethod)

from strategies import wire
from fedaudit.defenses import get_defense
from fedaudit.scenario import DefenseConfig

#: metric every client sends (value 1) under dp-server / dp-client / clip: FedAvg weighs
#: by it, i.e. uniformly -- what the noise calibration and Flower's accountant assume
UNIT_WEIGHT_KEY = wire.UNIT_WEIGHT


def noise_seed(seed: int, server_round: int) -> int:
    """numpy seed of the server-side noise of one round."""
    return int(np.random.SeedSequence([seed, server_round, 0xD9]).generate_state(1)[0])


@contextlib.contextmanager
def numpy_global_seed(seed: int) -> Iterator[None]:
    """Seed numpy's global generator for the block, then restore its previous state."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


class OpacusGaussianAccountant:
    """Flower's ``PrivacyAccountant`` protocol for the fixed-clipping wrappers, with
    Opacus' RDP accountant as the backend (Flower's own ``RdpAccountant`` needs the
    optional ``dp-accounting`` package, which this project does not install).

    Only ``SamplingMethod.NO_AMPLIFICATION`` (what Flower supports for these wrappers):
    each release is the plain Gaussian mechanism, RDP(alpha) = alpha / (2 sigma^2),
    composed over releases; epsilon from Opacus' RDP -> (epsilon, delta) conversion
    (:func:`fedaudit.defenses.accounting.gaussian_epsilon`).
    """

    def __init__(self, config: PrivacyConfig) -> None:
        if config.sampling_method is not SamplingMethod.NO_AMPLIFICATION:
            raise ValueError("OpacusGaussianAccountant supports sampling_method="
                             "'no-amplification' only")
        self._config = config
        self._events: list[tuple[GaussianPrivacyEvent, int]] = []

    @property
    def config(self) -> PrivacyConfig:
        return self._config

    @property
    def num_releases(self) -> int:
        return sum(c for _, c in self._events)

    def _check(self, event: GaussianPrivacyEvent, count: int) -> None:
        if event.population_size != self._config.population_size:
            raise ValueError("privacy event population_size does not match PrivacyConfig: "
                             f"{event.population_size} != {self._config.population_size}")
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError("count must be a positive integer")

    def compose(self, event: GaussianPrivacyEvent, count: int = 1) -> None:
        self._check(event, count)
        self._events.append((event, count))

    def _epsilon(self, events: list[tuple[GaussianPrivacyEvent, int]], delta: float) -> float:
        from opacus.accountants import RDPAccountant

        if not events:
            return 0.0
        acc = RDPAccountant()
        acc.history = [(e.noise_multiplier, 1.0, c) for e, c in events]
        eps = float(acc.get_epsilon(delta=delta))
        return math.inf if math.isnan(eps) else eps

    def get_epsilon(self, delta: float) -> float:
        return self._epsilon(self._events, delta)

    def get_delta(self, epsilon: float) -> float:
        raise NotImplementedError("OpacusGaussianAccountant reports epsilon at a delta only")

    def get_privacy_spent(self, delta: float | None = None) -> PrivacySpent:
        delta = self._config.target_delta if delta is None else delta
        return PrivacySpent(epsilon=self.get_epsilon(delta), delta=delta,
                            num_releases=self.num_releases, accounting_method="rdp (opacus)")

    def would_exceed(self, event: GaussianPrivacyEvent, max_epsilon: float | None = None,
                     count: int = 1) -> bool:
        self._check(event, count)
        limit = self._config.max_epsilon if max_epsilon is None else max_epsilon
        if limit is None:
            raise ValueError("max_epsilon must be given in PrivacyConfig or to would_exceed()")
        return self._epsilon([*self._events, (event, count)], self._config.target_delta) > limit

    def state_dict(self) -> dict[str, object]:
        return {"events": [{"noise_multiplier": e.noise_multiplier, "sample_size": e.sample_size,
                            "population_size": e.population_size, "count": c}
                           for e, c in self._events]}

    def load_state_dict(self, state: dict[str, object]) -> None:
        events = []
        for item in state["events"]:  # type: ignore[union-attr]
            c = int(item.pop("count"))
            events.append((GaussianPrivacyEvent(**item), c))
        self._events = events


class _SeededNoise:
    """Mixin for Flower's fixed-clipping DP wrappers: Gaussian noise drawn from a seed per
    round (numpy's global RNG, restored afterwards), so runs are reproducible."""

    def __init__(self, strategy: Strategy, noise_multiplier: float, clipping_norm: float,
                 num_sampled_clients: int, *, seed: int, accountant=None) -> None:
        super().__init__(strategy, noise_multiplier, clipping_norm, num_sampled_clients,
                         accountant=accountant)
        self.seed = seed

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        with numpy_global_seed(noise_seed(self.seed, server_round)):
            return super().aggregate_train(server_round, replies)


class SeededServerSideFixedClipping(_SeededNoise, DifferentialPrivacyServerSideFixedClipping):
    """Flower's server-side fixed clipping, noise drawn from a per-round seed."""


class SeededClientSideFixedClipping(_SeededNoise, DifferentialPrivacyClientSideFixedClipping):
    """Flower's client-side fixed clipping wrapper, noise drawn from a per-round seed."""


#: Flower wrapper classes by the name a :class:`fedaudit.defenses.Defense` gives in
#: ``wrapper``
WRAPPERS: dict[str, type] = {"server-fixed-clipping": SeededServerSideFixedClipping,
                             "client-fixed-clipping": SeededClientSideFixedClipping}


def wrap_defense(strategy: Strategy, defense: DefenseConfig, *, num_clients: int,
                 num_sampled: int, seed: int) -> Strategy:
    """The Flower wrapper the ``[defense]`` table's kind names, around ``strategy``; the
    strategy itself when the kind has none (``none``; ``dp-sgd`` lives on the clients).
    With noise, the wrapper gets an accountant."""

    kind = get_defense(defense.kind)
    if kind.wrapper is None:
        return strategy
    sigma = kind.noise_multiplier(defense)
    accountant = None
    if sigma > 0:
        accountant = OpacusGaussianAccountant(PrivacyConfig(
            target_delta=float(defense.options["delta"]), population_size=num_clients,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            sampling_method=SamplingMethod.NO_AMPLIFICATION))
    return WRAPPERS[kind.wrapper](strategy, sigma, float(defense.options["clip_norm"]), num_sampled,
                                  seed=seed, accountant=accountant)


def clip_when_asked_mod(msg: Message, ctxt: Context, call_next) -> Message:
    """ClientApp mod: Flower's ``fixedclipping_mod`` on train messages whose config carries
    ``clipping_norm`` (sent by the client-side DP wrapper); every other message passes
    through (``fixedclipping_mod`` itself errors when the key is missing)."""
    from flwr.clientapp.mod import fixedclipping_mod

    if msg.metadata.message_type == MessageType.TRAIN and any(
            KEY_CLIPPING_NORM in rec for rec in msg.content.config_records.values()):
        return fixedclipping_mod(msg, ctxt, call_next)
    return call_next(msg, ctxt)
