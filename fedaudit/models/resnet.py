"""``resnet18``: torchvision's ResNet-18 adapted to 32x32 inputs and GroupNorm."""

from __future__ import annotations

from torch import nn

from fedaudit.models.registry import register_model


@register_model("resnet18")
def resnet18(in_channels: int, image_size: int, num_classes: int, width: int = 16) -> nn.Module:
    """torchvision ResNet-18 for 32x32 inputs: 3x3 stem with stride 1, no max-pool,
    GroupNorm(32) instead of BatchNorm.  ``width`` is ignored (the standard 64)."""
    from torchvision.models import resnet18 as tv_resnet18

    model = tv_resnet18(num_classes=num_classes, norm_layer=lambda c: nn.GroupNorm(32, c))
    model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
