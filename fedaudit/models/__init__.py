"""Models built by name.  No BatchNorm anywhere: per-sample gradients (GNQ, DP-SGD) need
GroupNorm, whose per-sample gradient exists."""

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


@register_model("mlp")
def mlp(in_channels: int, image_size: int, num_classes: int, width: int = 16) -> nn.Module:
    """Two hidden layers of ``8 * width`` units with ReLU."""
    hidden = 8 * width
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_channels * image_size * image_size, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )


@register_model("cnn")
def cnn(in_channels: int, image_size: int, num_classes: int, width: int = 16) -> nn.Module:
    """Two 3x3 conv blocks with GroupNorm (an extra 2x2 pooling for images >= 16 px)."""
    w = width
    layers: list[nn.Module] = [nn.Conv2d(in_channels, w, 3, padding=1),
                               nn.GroupNorm(min(4, w), w), nn.ReLU()]
    size = image_size
    if size >= 16:
        layers.append(nn.MaxPool2d(2))
        size //= 2
    layers += [nn.Conv2d(w, 2 * w, 3, padding=1), nn.GroupNorm(min(8, 2 * w), 2 * w),
               nn.ReLU(), nn.MaxPool2d(2)]
    size //= 2
    layers += [nn.Flatten(), nn.Linear(2 * w * size * size, 64), nn.ReLU(),
               nn.Linear(64, num_classes)]
    return nn.Sequential(*layers)


@register_model("resnet18")
def resnet18(in_channels: int, image_size: int, num_classes: int, width: int = 16) -> nn.Module:
    """torchvision ResNet-18 for 32x32 inputs: 3x3 stem with stride 1, no max-pool,
    GroupNorm(32) instead of BatchNorm.  ``width`` is ignored (the standard 64)."""
    from torchvision.models import resnet18 as tv_resnet18

    model = tv_resnet18(num_classes=num_classes, norm_layer=lambda c: nn.GroupNorm(32, c))
    model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


MODELS.mark_builtin()


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
