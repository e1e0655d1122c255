"""In-run BS-Ghost GNQ auditing of an ordinary training step: :class:`GhostAuditor`.

:class:`GhostAuditor` hooks every layer that owns trainable parameters: a forward hook
keeps the layer input ``a`` and attaches a tensor hook to the layer output, which
receives the output gradient ``b`` during the normal ``loss.backward()``. The layer's
ghost kernel (:mod:`fedaudit.gnq.kernels`) then adds its (B x B) contribution to
K = G G^T right away, so the captured tensors are released as the backward proceeds.
The gradients the optimizer sees are not touched (hooks only read).

GNQ_j = h_j / (1 - h_j), h = diag((K + lam I)^{-1} K)  (arXiv 2510.10902; ghost trick of
Li et al., arXiv 2110.05679). Each GNQ is that of the sample's OWN loss (sum reduction):
with a mean-reduced loss the backward carries b_i / B, so K is rescaled by B^2.
:func:`fedaudit.gnq.gnq_scores` (:mod:`fedaudit.gnq.scores`) scores one batch with it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Literal

import torch
import torch.nn as nn

from .core import DEFAULT_LAM, DEFAULT_RHO, _gnq_from_trusted_gram, validate_options
from .kernels import (
    KERNELS,
    STRATEGIES,
    KernelFn,
    check_batch_statistics,
    check_module,
    conv_kernel,
    conv_materializes,
    conv_per_sample_weight_grads,
    find_kernel,
)
from .ghost import GramAccumulator, Rows

__all__ = ["GhostAuditor"]

LOSS_REDUCTIONS: tuple[str, ...] = ("mean", "sum")


class GhostAuditor:
    """Per-sample GNQ of every sample in a training batch, from the ordinary backward.

    Usage::

        auditor = GhostAuditor(model, lam=1e-2, loss_reduction="mean")
        with auditor.capture():
            loss = F.cross_entropy(model(x), y)
            loss.backward()
        optimizer.step()
        scores = auditor.scores()   # float64 (B,), on the model's device

    Args:
        model: the network. Every submodule owning trainable parameters must have a
            registered kernel (:data:`fedaudit.gnq.KERNELS`) and be called at most once
            per forward; BatchNorm in training mode is rejected.
        lam, lam_mode, rho, normalize: see :mod:`fedaudit.gnq.core`
            (relative mode: lam = rho * trace(K) / B, default rho = 1e-2).
        loss_reduction: how the loss given to ``backward`` reduces over the batch
            (dim 0): ``"mean"`` (K is rescaled by B^2) or ``"sum"``.
        gram_dtype: dtype the kernels work in; None keeps the captured tensors' dtype
            (float16/bfloat16 are promoted to float32). K itself is accumulated in
            float64 and the built-in kernels are float64-accurate also on float32
            tensors (:func:`fedaudit.gnq.ghost.gram`); the solve is float64.
        strategy: ``"auto"`` (per layer, the cheaper form by arithmetic, see
            :func:`fedaudit.gnq.ghost._use_ghost`), ``"ghost"`` or
            ``"materialize"`` (forcing one form; for tests and benchmarks).
        fuse_grad: for convolutions whose per-sample weight gradients are materialised,
            derive the weight's ``.grad`` from them (sum over the batch) instead of letting
            autograd compute it a second time: the weight is excluded from the autograd
            graph for that forward (``requires_grad`` off between the layer's forward
            pre-hook and forward hook) and its summed gradient is accumulated into
            ``.grad`` in the backward hook. Equal to the plain gradient up to float
            rounding (the order of the sum differs). Only for ``loss.backward()``;
            :func:`~fedaudit.gnq.scores.gnq_scores`, which must leave ``.grad``
            untouched, keeps it off.
    """

    def __init__(
        self,
        model: nn.Module,
        lam: float = DEFAULT_LAM,
        lam_mode: Literal["absolute", "relative"] = "absolute",
        rho: float = DEFAULT_RHO,
        loss_reduction: Literal["mean", "sum"] = "mean",
        normalize: bool = False,
        gram_dtype: torch.dtype | None = None,
        strategy: Literal["auto", "ghost", "materialize"] = "auto",
        fuse_grad: bool = False,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.lam, self.lam_mode, self.rho = validate_options(lam, lam_mode, rho)
        if loss_reduction not in LOSS_REDUCTIONS:
            raise ValueError(
                f"loss_reduction must be one of {list(LOSS_REDUCTIONS)}, got {loss_reduction!r}"
            )
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
        if gram_dtype is not None and not (
            isinstance(gram_dtype, torch.dtype) and gram_dtype.is_floating_point
        ):
            raise ValueError(
                f"gram_dtype must be a floating torch.dtype or None, got {gram_dtype!r}"
            )
        self.model = model
        self.loss_reduction = loss_reduction
        self.normalize = bool(normalize)
        self.gram_dtype = gram_dtype
        self.strategy = strategy
        self.fuse_grad = bool(fuse_grad)
        self._fused: dict[str, nn.Parameter] = {}
        self._acc = GramAccumulator()  # K of the current step; its buffer lives on
        self._B: int | None = None
        self._called: set[str] = set()
        self._active = False
        self._generation = 0
        # Resolved once: which modules get hooks. capture() only re-checks what can change
        # between steps (BatchNorm mode, parameters of kernel-less modules turning trainable).
        self._layers: list[tuple[str, nn.Module, KernelFn]] = []
        self._batchnorms: list[tuple[str, nn.Module]] = []
        self._unhooked: list[tuple[str, nn.Module]] = []
        for name, module in model.named_modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                self._batchnorms.append((name, module))
            if not any(True for _ in module.parameters(recurse=False)):
                continue
            if type(module) in KERNELS:
                check_module(name, module, batch_statistics=False)
                self._layers.append((name, module, find_kernel(module)))
            else:
                self._unhooked.append((name, module))
        for name, module in self._unhooked:
            check_module(name, module)  # raises if it has trainable parameters

    # ------------------------------------------------------------------ capture
    @contextmanager
    def capture(self) -> Iterator["GhostAuditor"]:
        """Register the hooks for one training step (forward + backward); remove on exit.

        Forward passes run with gradients disabled (e.g. evaluation) are ignored. The set
        of hooked modules is fixed when the auditor is constructed: build it after the
        model.
        """
        if self._active:
            raise RuntimeError("GhostAuditor.capture() is already active (not re-entrant)")
        for name, module in self._batchnorms:
            check_batch_statistics(name, module)
        for name, module in self._unhooked:
            check_module(name, module)
        layers = [
            (n, m, k) for n, m, k in self._layers
            if any(p.requires_grad for p in m.parameters(recurse=False))
        ]
        if not layers:
            raise ValueError("the model has no trainable parameters to audit")
        self._acc.reset()
        self._B = None
        self._called = set()
        self._generation += 1
        generation = self._generation
        self._fused = {}
        handles = [
            m.register_forward_hook(self._forward_hook(n, k, generation)) for n, m, k in layers
        ]
        if self.fuse_grad:
            handles += [
                m.register_forward_pre_hook(self._fuse_pre_hook(n)) for n, m, k in layers
                if k is conv_kernel and m.weight.requires_grad
            ]
        self._active = True
        try:
            yield self
        except BaseException:
            self._acc.reset()  # a partial K must not be scored
            raise
        finally:
            for h in handles:
                h.remove()
            for weight in self._fused.values():
                weight.requires_grad_(True)
            self._fused = {}
            self._active = False

    def _fuse_pre_hook(self, name: str):
        def pre_hook(module: nn.Module, inputs: tuple) -> None:
            x = inputs[0] if inputs else None
            if not torch.is_grad_enabled() or not isinstance(x, torch.Tensor):
                return
            bias = module.bias
            # without a grad-carrying input or bias the output would need no gradient
            # at all and the backward hook would never fire
            if not (x.requires_grad or (bias is not None and bias.requires_grad)):
                return
            if x.dim() != len(module.kernel_size) + 2:
                return  # conv_kernel reports the unbatched input
            if conv_materializes(module, tuple(x.shape), self.strategy):
                self._fused[name] = module.weight
                module.weight.requires_grad_(False)

        return pre_hook

    def _forward_hook(self, name: str, kernel: KernelFn, generation: int):
        def hook(module: nn.Module, inputs: tuple, output: object) -> None:
            fused = self._fused.get(name)
            if fused is not None:
                fused.requires_grad_(True)  # out of this forward's graph only
            if not torch.is_grad_enabled():
                return
            if not isinstance(output, torch.Tensor) or not output.requires_grad:
                return
            if name in self._called:
                raise RuntimeError(
                    f"module {name!r} ({type(module).__name__}) was called more than once "
                    "inside one GhostAuditor.capture(); shared or reused modules (and "
                    "several forwards per capture) are not supported by the ghost auditor. "
                    "Use gnq_scores(..., method='naive') for such models."
                )
            self._called.add(name)
            # A list so the backward hook can drop the activation once it is used.
            holder = [inputs[0].detach()]

            def backward_hook(grad: torch.Tensor) -> None:
                if generation != self._generation:
                    if fused is not None:  # its weight gradient would be lost silently
                        raise RuntimeError(
                            f"module {name!r}: with fuse_grad=True the backward must run "
                            "inside the capture() of its forward"
                        )
                    return  # graph of an earlier capture, backpropagated late
                if not holder:
                    raise RuntimeError(
                        f"backward ran twice through module {name!r} within one capture(); "
                        "use one backward per capture"
                    )
                if fused is not None:
                    with torch.no_grad():
                        self._accumulate_fused(name, module, fused, holder.pop(), grad.detach())
                elif torch.is_grad_enabled():  # backward(create_graph=True)
                    with torch.no_grad():
                        self._accumulate(name, module, kernel, holder.pop(), grad.detach())
                else:
                    self._accumulate(name, module, kernel, holder.pop(), grad)

            output.register_hook(backward_hook)

        return hook

    def _accumulate_fused(
        self, name: str, module: nn.Module, weight: nn.Parameter, a: torch.Tensor,
        b: torch.Tensor,
    ) -> None:
        """A convolution whose weight was kept out of autograd: per-sample weight
        gradients -> their Gram AND the weight's summed gradient (one computation)."""
        B = self._check_batch(name, b)
        a, b = self._cast(a, b)
        gw = conv_per_sample_weight_grads(module, a, b)
        summed = gw.sum(0).view_as(weight).to(weight.dtype)
        if weight.grad is None:
            weight.grad = summed
        else:
            weight.grad.add_(summed)
        self._acc.add(Rows(gw))
        bias = module.bias
        if bias is not None and bias.requires_grad:
            self._acc.add(Rows(b.reshape(B, module.out_channels, -1).sum(2)))

    def _check_batch(self, name: str, b: torch.Tensor) -> int:
        B = b.shape[0] if b.dim() > 0 else 0
        if self._B is None:
            self._B = B
        elif B != self._B:
            raise RuntimeError(
                f"module {name!r}: batch size {B} differs from {self._B} seen in other layers; "
                "all audited layers must see the batch on dim 0"
            )
        return B

    def _cast(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = self.gram_dtype
        if dtype is None:
            dtype = b.dtype if b.dtype in (torch.float32, torch.float64) else torch.float32
        if b.dtype != dtype:
            b = b.to(dtype)
        if a.dtype != dtype and a.is_floating_point():
            a = a.to(dtype)
        return a, b

    def _accumulate(
        self, name: str, module: nn.Module, kernel: KernelFn, a: torch.Tensor, b: torch.Tensor
    ) -> None:
        self._check_batch(name, b)
        a, b = self._cast(a, b)
        self._acc.add(kernel(module, a, b, self.strategy))

    # ------------------------------------------------------------------ results
    @property
    def batch_size(self) -> int | None:
        """Batch size of the last captured step (None before any backward)."""
        return self._B

    def gram(self) -> torch.Tensor:
        """K = G G^T (float64, B x B) of per-sample gradients of each sample's own loss."""
        K = self._acc.result()
        if K is None:
            raise RuntimeError(
                "no gradients were captured: run the forward AND loss.backward() inside "
                "`with auditor.capture():` before asking for scores"
            )
        K = K.to(torch.float64)
        if self.loss_reduction == "mean":
            K = K * float(self._B) ** 2
        return K

    def scores(self) -> torch.Tensor:
        """GNQ of every sample of the captured batch: float64 tensor (B,) on K's device."""
        return _gnq_from_trusted_gram(
            self.gram(), self.lam, self.lam_mode, self.rho, self.normalize
        )
