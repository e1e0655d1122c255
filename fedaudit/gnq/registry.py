"""The GNQ kernel registry: :data:`KERNELS`, :func:`register_kernel` and the module checks.

:data:`KERNELS` maps an exact module type to its kernel ``fn(module, a, b, strategy)``
(like Opacus' ``grad_sample`` registry); the built-in kernels register themselves in the
``fedaudit.gnq.kernels_*`` modules, which :mod:`fedaudit.gnq.kernels` imports. A module
type that owns trainable parameters and is not registered is rejected with a ValueError
(:func:`check_module`), as is any BatchNorm in training mode
(:func:`check_batch_statistics`: its per-sample gradients do not exist, every sample's
output depends on the whole batch).
"""

from __future__ import annotations

from typing import Callable, Literal

import torch
import torch.nn as nn

from fedaudit.registry import Registry

__all__ = ["KERNELS", "STRATEGIES", "KernelFn", "register_kernel", "check_module",
           "check_batch_statistics", "find_kernel"]

Strategy = Literal["auto", "ghost", "materialize"]
STRATEGIES: tuple[str, ...] = ("auto", "ghost", "materialize")

KernelFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, str], object]
"""kernel(module, a, b, strategy) -> (B x B) contribution, per-sample rows
(:class:`fedaudit.gnq.ghost.Rows`), a list of these, or None if nothing is trainable."""

CheckFn = Callable[[nn.Module], None]

#: module type -> kernel, with meta ``check`` (``check(module)`` or None)
KERNELS: Registry[type[nn.Module], KernelFn] = Registry("GNQ kernel")


def register_kernel(
    *module_types: type[nn.Module], check: CheckFn | None = None, replace: bool = False
) -> Callable[[KernelFn], KernelFn]:
    """Decorator registering ``fn(module, a, b, strategy) -> Tensor | None`` for module types.

    ``a`` is the module's first positional input (detached), ``b`` the gradient of the
    loss with respect to its output, both with the batch on dim 0. The function returns
    the (B x B) Gram contribution of the module's trainable parameters (skipping those
    with ``requires_grad=False``), or their per-sample gradients as ``Rows(X)`` (X of
    shape (B, n); the auditor adds X X^T in float64 with the other layers' rows), a list
    of both, or None. ``check(module)``, if given, is called before
    capturing and should raise ValueError for configurations the kernel cannot handle.
    Registration is by exact type (a subclass may change ``forward``).  A type that
    already has another kernel (a built-in one, say) needs ``replace=True``.
    """
    if not module_types:
        raise TypeError("register_kernel needs at least one module type")
    for t in module_types:
        if not (isinstance(t, type) and issubclass(t, nn.Module)):
            raise TypeError(f"register_kernel expects nn.Module subclasses, got {t!r}")

    def deco(fn: KernelFn) -> KernelFn:
        for t in module_types:
            KERNELS.register(t, fn, replace=replace, check=check)
        return fn

    return deco


def _has_trainable_params(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters(recurse=False))


def _label(name: str, module: nn.Module) -> str:
    return f"module {name!r} ({type(module).__name__})" if name else type(module).__name__


def check_batch_statistics(name: str, module: nn.Module) -> None:
    """Raise ValueError if ``module`` is a BatchNorm that normalises with batch statistics."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm) and (
        module.training or not module.track_running_stats
    ):
        raise ValueError(
            f"{_label(name, module)}: BatchNorm in training mode normalises with batch "
            "statistics, so a sample's gradient depends on the whole batch and per-sample "
            "gradients (hence GNQ) are undefined. Use GroupNorm (e.g. nn.GroupNorm(8, C)) "
            "or LayerNorm instead, or put the BatchNorm in eval mode with running statistics."
        )


def check_module(name: str, module: nn.Module, batch_statistics: bool = True) -> bool:
    """Validate one module for ghost auditing; True if it has a kernel to run.

    Raises ValueError for BatchNorm in training mode (or without running statistics;
    skipped when ``batch_statistics`` is False), for unregistered module types with
    trainable parameters of their own, and for configurations a kernel rejects.
    """
    if batch_statistics:
        check_batch_statistics(name, module)
    if not _has_trainable_params(module):
        return False
    kernel_type = type(module)
    if kernel_type not in KERNELS:
        known = ", ".join(sorted(t.__name__ for t in KERNELS))
        raise ValueError(
            f"{_label(name, module)} has trainable parameters but no ghost kernel is "
            f"registered for {kernel_type.__name__}. Register one with "
            f"@fedaudit.gnq.register_kernel({kernel_type.__name__}), freeze its parameters, "
            f"or use method='naive'. Registered types: {known}."
        )
    check = KERNELS.meta(kernel_type).get("check")
    if check is not None:
        try:
            check(module)
        except ValueError as exc:
            raise ValueError(f"{_label(name, module)}: {exc}") from None
    return True


def find_kernel(module: nn.Module) -> KernelFn:
    return KERNELS[type(module)]
