"""GNQ kernels of the normalisation layers: GroupNorm, LayerNorm, RMSNorm and BatchNorm in
eval mode.

Each is an elementwise affine map y = weight * xhat + bias of the normalised input xhat,
so the per-sample gradients are sums of b * xhat (weight) and of b (bias) over the
positions that share a parameter, and the contribution is their Gram
(:func:`_affine_gram`). BatchNorm in training mode has no per-sample gradients and is
rejected before capture (:func:`fedaudit.gnq.registry.check_batch_statistics`).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ghost import Rows, _trainable
from .registry import KERNELS, register_kernel

__all__ = ["batchnorm_eval_kernel", "groupnorm_kernel", "layernorm_kernel"]


def _affine_gram(
    module: nn.Module, b: torch.Tensor, xhat: torch.Tensor, channel_axis: bool, n: int
) -> torch.Tensor | None:
    """Gram of per-sample gradients of an elementwise affine y = weight * xhat + bias.

    channel_axis=True: parameters along dim 1 of (B, C, *) (sum over the rest);
    False: parameters over the trailing n elements of (B, *, n) (sum over the middle).
    """
    B = b.shape[0]

    def per_sample(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(B, n, -1).sum(2) if channel_axis else t.reshape(B, -1, n).sum(1)

    parts = []
    if _trainable(getattr(module, "weight", None)):
        parts.append(per_sample(b * xhat))
    if _trainable(getattr(module, "bias", None)):
        parts.append(per_sample(b))
    return [Rows(x) for x in parts] or None


@register_kernel(nn.GroupNorm)
def groupnorm_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """GroupNorm: per-sample grads sum_spatial(b * xhat) and sum_spatial(b), per channel."""
    xhat = F.group_norm(a, module.num_groups, None, None, module.eps)
    return _affine_gram(module, b, xhat, True, module.num_channels)


@register_kernel(nn.LayerNorm)
def layernorm_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """LayerNorm: per-sample grads sum over leading positions of b * xhat and of b."""
    xhat = F.layer_norm(a, module.normalized_shape, None, None, module.eps)
    n = 1
    for s in module.normalized_shape:
        n *= s
    return _affine_gram(module, b, xhat, False, n)


if hasattr(nn, "RMSNorm"):

    @register_kernel(nn.RMSNorm)
    def rmsnorm_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
        """RMSNorm: per-sample weight grad sum over leading positions of b * x / rms(x)."""
        xhat = F.rms_norm(a, module.normalized_shape, None, module.eps)
        n = 1
        for s in module.normalized_shape:
            n *= s
        return _affine_gram(module, b, xhat, False, n)


@register_kernel(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def batchnorm_eval_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """BatchNorm in eval mode with running statistics (a fixed per-channel affine map).

    Training-mode BatchNorm is rejected by :func:`~fedaudit.gnq.registry.check_module` before
    capture.
    """
    shape = (1, -1) + (1,) * (a.dim() - 2)
    mean = module.running_mean.to(a.dtype).view(shape)
    inv_std = torch.rsqrt(module.running_var.to(a.dtype) + module.eps).view(shape)
    xhat = (a - mean) * inv_std
    return _affine_gram(module, b, xhat, True, module.num_features)


KERNELS.mark_builtin()
