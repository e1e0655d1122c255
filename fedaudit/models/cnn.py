"""``cnn``: a small convolutional network with GroupNorm."""

from __future__ import annotations

from torch import nn

from fedaudit.models.registry import register_model


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
