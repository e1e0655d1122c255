"""GNQ kernel of ``nn.Conv1d`` / ``nn.Conv2d``, and the convolution helpers the auditor's
fused gradient uses.

T = output positions, d = C_in/groups * prod(kernel), p = C_out/groups: the ghost form
over unfolded patches (``F.unfold``), or the per-sample weight gradients of
:func:`conv_per_sample_weight_grads` (the weight gradient of the same convolution with
the batch folded into the groups) and their Gram, whichever is cheaper
(:func:`~fedaudit.gnq.ghost._use_ghost`). Padding modes other than zeros are applied
explicitly before the op.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ghost import Rows, _trainable, _use_ghost, _weight_gram
from .registry import KERNELS, register_kernel

__all__ = ["conv_kernel", "conv_materializes", "conv_output_positions",
           "conv_per_sample_weight_grads"]


def _conv_check(module: nn.Module) -> None:
    if module.padding_mode not in ("zeros", "reflect", "replicate", "circular"):
        raise ValueError(f"unsupported padding_mode {module.padding_mode!r}")


def _explicit_padding(module: nn.Module) -> list[int]:
    """F.pad-style padding (last dim first, (left, right) per dim) for the module."""
    k, dil = module.kernel_size, module.dilation
    if isinstance(module.padding, str):
        if module.padding == "valid":
            per_dim = [(0, 0)] * len(k)
        else:  # "same": torch puts the extra element on the right
            per_dim = []
            for kk, dd in zip(k, dil):
                total = dd * (kk - 1)
                per_dim.append((total // 2, total - total // 2))
    else:
        per_dim = [(pp, pp) for pp in module.padding]
    pad: list[int] = []
    for left, right in reversed(per_dim):
        pad += [left, right]
    return pad


def _conv_padding(module: nn.Module, a: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """(input, padding): symmetric zero padding is left to the op, any other is applied."""
    nd = len(module.kernel_size)
    if module.padding_mode == "zeros" and not isinstance(module.padding, str):
        return a, tuple(module.padding)
    pad = _explicit_padding(module)
    if any(pad):
        mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
        a = F.pad(a, pad, mode=mode)
    return a, (0,) * nd


def _conv_dims(module: nn.Module) -> tuple[int, int, int]:
    """(g, p, d) of a convolution: groups, C_out/groups, C_in/groups * prod(kernel)."""
    g = module.groups
    d = module.weight.shape[1]
    for k in module.kernel_size:
        d *= k
    return g, module.out_channels // g, d


def conv_output_positions(module: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Number of output positions T of a Conv1d/Conv2d for a batched input shape."""
    T = 1
    for i, (n, k, s, dl) in enumerate(zip(input_shape[2:], module.kernel_size, module.stride,
                                          module.dilation)):
        if isinstance(module.padding, str):
            if module.padding == "same":
                T *= n
                continue
            pad = 0
        else:
            pad = 2 * module.padding[i]
        T *= (n + pad - dl * (k - 1) - 1) // s + 1
    return T


def conv_materializes(module: nn.Module, input_shape: tuple[int, ...], strategy: str) -> bool:
    """True when :func:`conv_kernel` materialises the per-sample weight gradients."""
    g, p, d = _conv_dims(module)
    T = conv_output_positions(module, input_shape)
    return not _use_ghost(T, p, d, strategy, input_shape[0], g)


def conv_per_sample_weight_grads(module: nn.Module, a: torch.Tensor,
                                 b: torch.Tensor) -> torch.Tensor:
    """(B, C_out * C_in/groups * prod(k)) per-sample weight gradients of a convolution:
    the weight gradient of the same convolution with the batch folded into the groups
    (input (1, B*C_in, ...), groups = B*groups), exact and without unfold."""
    nd = len(module.kernel_size)
    a, padding = _conv_padding(module, a)
    B, c_out = a.shape[0], module.out_channels
    return torch.ops.aten.convolution_backward(
        b.reshape(1, B * c_out, *b.shape[2:]),
        a.reshape(1, B * a.shape[1], *a.shape[2:]),
        a.new_empty((B * c_out, *module.weight.shape[1:])),  # only its shape is used
        None,
        list(module.stride),
        list(padding),
        list(module.dilation),
        False,
        [0] * nd,
        B * module.groups,
        [False, True, False],
    )[1].reshape(B, -1)


@register_kernel(nn.Conv1d, nn.Conv2d, check=_conv_check)
def conv_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """Conv1d/Conv2d: T = output positions, d = C_in/groups * prod(k), p = C_out/groups.

    Ghost form over unfolded patches, or the per-sample weight gradients of
    :func:`conv_per_sample_weight_grads` and their Gram.
    """
    nd = len(module.kernel_size)
    if a.dim() != nd + 2:
        raise ValueError(
            f"{type(module).__name__} input of shape {tuple(a.shape)} is not batched; "
            f"GNQ needs (B, C, {'L' if nd == 1 else 'H, W'})"
        )
    B = a.shape[0]
    bt = b.reshape(B, module.out_channels, -1)
    T = bt.shape[-1]
    g, p, d = _conv_dims(module)
    parts = []
    if _trainable(module.weight):
        if _use_ghost(T, p, d, strategy, B, g):
            padded, padding = _conv_padding(module, a)
            parts.append(_conv_ghost(module, padded, bt, padding, strategy))
        else:
            parts.append(Rows(conv_per_sample_weight_grads(module, a, b)))
    if _trainable(module.bias):
        parts.append(Rows(bt.sum(2)))
    return parts or None


def _conv_ghost(
    module: nn.Module, a: torch.Tensor, bt: torch.Tensor, padding: tuple[int, ...], strategy: str
) -> torch.Tensor:
    kernel_size, stride, dilation = module.kernel_size, module.stride, module.dilation
    if len(kernel_size) == 1:
        a = a.unsqueeze(2)
        kernel_size, stride, dilation = (1, *kernel_size), (1, *stride), (1, *dilation)
        padding = (0, *padding)
    patches = F.unfold(a, kernel_size, dilation=dilation, padding=padding, stride=stride)
    B, _, T = patches.shape
    if bt.shape[-1] != T:
        raise RuntimeError(
            f"{type(module).__name__}: {T} unfolded positions but the output gradient has "
            f"{bt.shape[-1]}; unsupported configuration"
        )
    g = module.groups
    A = patches.view(B, g, -1, T).permute(1, 0, 3, 2)  # (g, B, T, d)
    Bm = bt.view(B, g, -1, T).permute(1, 0, 3, 2)  # (g, B, T, p)
    return _weight_gram(A, Bm, strategy)


KERNELS.mark_builtin()
