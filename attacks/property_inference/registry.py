"""Registries of property inference: the attacks (name -> ``fn(aux, **options) -> float``)
and the properties (name -> ``fn(x, **options) -> bool (N,)``).

An attack gets an :class:`AuxiliaryUpdates`: the updates the client's local training gives
on auxiliary batches with (``labels`` 1) and without (0) the property, from the model the
client started from, and the client's real update, each flattened to one feature vector;
it returns a score for the real update, higher meaning "the client's data holds the
property".  It never sees the client's data.

A property reads a batch of samples' inputs (``(N, C, H, W)`` floats in [0, 1]) and says
which samples have it; it must not be the label (that is label leakage).

Adding either is one module here with one decorator line (``@register_property_attack``,
``@register_property``), options declared like the other attacks'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedaudit.options import Field, check_options
from fedaudit.registry import Registry

__all__ = ["PROPERTIES", "PROPERTY_ATTACKS", "AuxiliaryUpdates", "register_property",
           "register_property_attack"]


@dataclass(frozen=True, eq=False)
class AuxiliaryUpdates:
    """``features`` (B, D) float64: one flattened update per auxiliary batch; ``labels``
    (B,) int64: 1 when the batch holds the property, 0 when not; ``target`` (D,) float64:
    the client's real update, flattened the same way."""

    features: np.ndarray
    labels: np.ndarray
    target: np.ndarray

    def __post_init__(self) -> None:
        f, y, t = self.features, self.labels, self.target
        if f.ndim != 2 or y.shape != (len(f),) or t.shape != (f.shape[1],):
            raise ValueError(f"AuxiliaryUpdates needs features (B, D), labels (B,) and target "
                             f"(D,); got {f.shape}, {y.shape}, {t.shape}")
        if set(np.unique(y).tolist()) != {0, 1}:
            raise ValueError("AuxiliaryUpdates.labels must hold both 0 and 1 (batches with "
                             "and without the property)")


def _check(kind: str):
    def check(name: str, fn: Any, meta: dict) -> None:
        if not callable(fn):
            raise TypeError(f"{kind} {name!r} must be a callable")
        check_options(f"{kind} {name!r}", meta.get("options", {}))
    return check


#: name -> ``fn(aux: AuxiliaryUpdates, **options) -> float``; meta ``label``, ``options``
PROPERTY_ATTACKS: Registry[str, Any] = Registry(
    "property attack", name_pattern=r"[a-z][a-z0-9-]*", check=_check("property attack"))
#: name -> ``fn(x: (N, C, H, W) floats, **options) -> bool (N,)``; meta ``describe``,
#: ``options``
PROPERTIES: Registry[str, Any] = Registry(
    "image property", name_pattern=r"[a-z][a-z0-9-]*", check=_check("image property"))


def register_property_attack(name: str, *, label: str | None = None,
                             options: Mapping[str, Field] | None = None,
                             replace: bool = False):
    """Decorator: register ``fn(aux, **options) -> float`` under ``name``."""
    return PROPERTY_ATTACKS.register(name, replace=replace, label=label or name,
                                     options=dict(options or {}))


def register_property(name: str, *, describe: str, options: Mapping[str, Field] | None = None,
                      replace: bool = False):
    """Decorator: register ``fn(x, **options) -> bool array`` under ``name``; ``describe``
    says what it selects, in results.json and the report."""
    return PROPERTIES.register(name, replace=replace, describe=describe,
                               options=dict(options or {}))
