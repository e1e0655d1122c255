"""The :class:`Defense` interface and its registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from fedaudit.options import Field
from fedaudit.registry import Registry, instance_registrar
from fedaudit.scenario import DefenseConfig, Scenario

#: kind -> a :class:`Defense` instance (the scenario's ``defense.kind`` choices)
DEFENSES: Registry[str, "Defense"] = Registry("defense", name_pattern=r"[a-z][a-z0-9-]*")


register_defense = instance_registrar(
    DEFENSES, "kind", """Class decorator: register an instance of ``cls`` under ``cls.kind`` (a
    kind that other code registered needs ``replace=True``; re-registering the same class,
    as a module reload does, replaces it).""")


def get_defense(kind: str) -> "Defense":
    return DEFENSES.get(kind)


class Defense:
    """What one ``[defense] kind`` does.  ``cfg`` is the scenario's typed ``[defense]``
    table; ``cfg.options`` holds the values of the options the defenses declare."""

    kind: ClassVar[str]
    #: the ``[defense]`` keys this kind reads (name -> :class:`fedaudit.options.Field`);
    #: the schema's ``[defense]`` table is the union over the registered defenses
    options: ClassVar[Mapping[str, Field]] = {}
    #: clients send ``dp-weight = 1`` and FedAvg weighs by it (uniform client weights):
    #: what the central DP wrappers' noise calibration and accounting assume
    uniform_weights: ClassVar[bool] = False
    #: name of the Flower wrapper put around the strategy (:mod:`strategies.defenses`),
    #: or None
    wrapper: ClassVar[str | None] = None
    #: whether :meth:`summary` accounts a privacy guarantee (then the audit side channel
    #: is noted)
    accounted: ClassVar[bool] = False
    #: what the server receives from a client under this defense (the model the curious
    #: server attacks, :mod:`fedaudit.audit.targets.client_models`)
    server_sees: ClassVar[str] = "each client's local model, as sent"
    #: the server transforms each client's update before aggregating (server-side
    #: clipping): impossible when it sees only the aggregate (secure aggregation)
    needs_each_update: ClassVar[bool] = False
    #: the one-run DP audit of this kind (``[audit.dp]``, :mod:`fedaudit.dp_audit`):
    #: "sample" (canary samples in the clients' data), "client" (canary clients) or None
    dp_audit: ClassVar[str | None] = None

    def noise_multiplier(self, cfg: DefenseConfig) -> float:
        return float(cfg.options["noise_multiplier"])

    def local_dp(self, cfg: DefenseConfig) -> Mapping[str, Any] | None:
        """Keyword ``dp`` for :func:`fedaudit.training.train_local` (DP-SGD: its
        ``noise_multiplier`` and ``clip_norm``), or None."""
        return None

    def client_update(self, cfg: DefenseConfig, start: Mapping[str, torch.Tensor],
                      trained: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The model a client sends after training from ``start`` to ``trained`` (state
        dicts on the CPU); by default ``trained`` itself.  A defense that changes the update
        before it leaves the client (e.g. ``sparsify``) overrides this."""
        return trained

    def check(self, scenario: Scenario) -> str | None:
        """A message when the scenario cannot run under this defense."""
        return None

    def parameters(self, cfg: DefenseConfig) -> dict[str, Any]:
        """results.json ``defense`` parameters."""
        return {"noise_multiplier": self.noise_multiplier(cfg),
                "clip_norm": float(cfg.options["clip_norm"]),
                "delta": float(cfg.options["delta"])}

    def summary(self, cfg: DefenseConfig, rounds: list[dict], *, num_clients: int,
                num_sampled: int | None) -> dict[str, Any]:
        """results.json ``defense`` fields of this kind: ``epsilon`` (a float, "inf" or
        None), ``accounting`` (one sentence) and ``notes`` (a list), plus any extras."""
        raise NotImplementedError
