"""``mlp``: a multi-layer perceptron on the flattened image."""

from __future__ import annotations

from torch import nn

from fedaudit.models.registry import register_model


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
