"""The model registry: :data:`MODELS` (name -> builder), :func:`register_model`,
:func:`build_model` and :func:`model_for`.  The built-in models are the other modules of
this folder.  No BatchNorm anywhere: per-sample gradients (GNQ, DP-SGD) need GroupNorm,
whose per-sample gradient exists."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from fedaudit.registry import Registry
from fedaudit.scenario import ModelConfig

#: name -> ``fn(in_channels, image_size, num_classes, width) -> nn.Module``
MODELS: Registry[str, Callable[..., nn.Module]] = Registry(
    "model", name_pattern=r"[a-z0-9][a-z0-9_.-]*")


def register_model(name: str, *, replace: bool = False, **meta):
    """Decorator: register a model builder ``fn(in_channels, image_size, num_classes,
    width) -> nn.Module`` under ``name`` (no BatchNorm: see the module docstring)."""
    return MODELS.register(name, replace=replace, **meta)


def build_model(name: str, *, in_channels: int, image_size: int, num_classes: int,
                width: int = 16, seed: int | None = None) -> nn.Module:
    """Build a registered model; with ``seed`` the initial weights are reproducible."""
    fn = MODELS.get(name)
    if seed is None:
        return fn(in_channels, image_size, num_classes, width)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn(in_channels, image_size, num_classes, width)


def model_for(cfg: ModelConfig, data, *, seed: int) -> nn.Module:
    """The ``[model]`` for ``data`` (a FederatedData), initialised from ``seed``."""
    _, c, h, _ = data.x.shape
    return build_model(cfg.name, in_channels=c, image_size=h, num_classes=data.num_classes,
                       width=cfg.width, seed=seed)
