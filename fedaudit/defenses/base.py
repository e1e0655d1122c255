"""The :class:`Defense` interface and its registry."""

from __future__ import annotations

from typing import Any, ClassVar

from fedaudit.registry import Registry

#: kind -> a :class:`Defense` instance (the scenario's ``defense.kind`` choices)
DEFENSES: Registry[str, "Defense"] = Registry("defense", name_pattern=r"[a-z][a-z0-9-]*")


def register_defense(cls: type["Defense"]) -> type["Defense"]:
    """Class decorator: register an instance of ``cls`` under ``cls.kind``."""
    DEFENSES.register(cls.kind, cls(), replace=True)
    return cls


def get_defense(kind: str) -> "Defense":
    return DEFENSES.get(kind)


class Defense:
    """What one ``[defense] kind`` does.  ``cfg`` is the resolved ``[defense]`` table
    (``kind``, ``noise_multiplier``, ``clip_norm``, ``delta``)."""

    kind: ClassVar[str]
    #: clients send ``dp-weight = 1`` and FedAvg weighs by it (uniform client weights):
    #: what the central DP wrappers' noise calibration and accounting assume
    uniform_weights: ClassVar[bool] = False
    #: name of the Flower wrapper put around the strategy (:mod:`strategies.defenses`),
    #: or None
    wrapper: ClassVar[str | None] = None
    #: whether :meth:`summary` accounts a privacy guarantee (then the audit side channel
    #: is noted)
    accounted: ClassVar[bool] = False

    def noise_multiplier(self, cfg: dict) -> float:
        return float(cfg["noise_multiplier"])

    def local_dp(self, cfg: dict) -> dict | None:
        """Keyword ``dp`` for :func:`fedaudit.training.train_local` (DP-SGD), or None."""
        return None

    def check(self, scenario: dict) -> str | None:
        """A message when the scenario cannot run under this defense."""
        return None

    def parameters(self, cfg: dict) -> dict[str, Any]:
        """results.json ``defense`` parameters."""
        return {"noise_multiplier": self.noise_multiplier(cfg),
                "clip_norm": float(cfg["clip_norm"]), "delta": float(cfg["delta"])}

    def summary(self, cfg: dict, rounds: list[dict], *, num_clients: int,
                num_sampled: int | None) -> dict[str, Any]:
        """results.json ``defense`` fields of this kind: ``epsilon`` (a float, "inf" or
        None), ``accounting`` (one sentence) and ``notes`` (a list), plus any extras."""
        raise NotImplementedError
