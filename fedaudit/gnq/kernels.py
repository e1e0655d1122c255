"""Ghost kernels: each layer's contribution to K = G G^T without materialising G.

A kernel receives, for one layer and one batch, the layer input ``a`` captured by a
forward hook and the gradient ``b`` of the loss with respect to the layer output
(captured in the ordinary backward pass) and returns that layer's (B x B) contribution
to the Gram matrix of the per-sample gradients of its trainable parameters. The total K
is the sum over layers (the per-sample gradient is the concatenation of the layers').

For a weight applied at T positions (Linear on sequences, Conv over unfolded patches)
the EXACT contributions are

    weight:  K_ij += sum_{t,s} (a_it . a_js) (b_it . b_js)
    bias:    K_ij += (sum_t b_it) . (sum_s b_js)

Per layer the cheaper of two exact evaluations is used: the T^2 "ghost" form above, or
the layer's materialised per-sample gradients (B x p x d; ``bmm(b^T, a)`` for Linear, a
batch-grouped convolution weight gradient for Conv) and their Gram.  Li et al. 2021
(arXiv 2110.05679) choose between the two by memory (ghost when 2 T^2 < p d); we choose
by arithmetic, with a memory cap (:func:`_use_ghost` says why). Flattening positions
into the feature axis (as the reference code of arXiv 2510.10902 does) is not exact when
T > 1 and is not used.

The registry :data:`KERNELS` maps an exact module type to its kernel (like Opacus'
``grad_sample`` registry); :func:`register_kernel` adds one. A module type that owns
trainable parameters and is not registered is rejected with a ValueError, as is any
BatchNorm in training mode (its per-sample gradients do not exist: every sample's output
depends on the whole batch).
"""

from __future__ import annotations

from typing import Callable, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from fedaudit.registry import Registry

__all__ = [
    "KERNELS",
    "STRATEGIES",
    "KernelFn",
    "register_kernel",
    "check_module",
    "check_batch_statistics",
    "find_kernel",
    "gram",
]

Strategy = Literal["auto", "ghost", "materialize"]
STRATEGIES: tuple[str, ...] = ("auto", "ghost", "materialize")

KernelFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, str], "torch.Tensor | None"]
"""kernel(module, a, b, strategy) -> (B x B) contribution, or None if nothing is trainable."""

CheckFn = Callable[[nn.Module], None]

#: module type -> kernel, with meta ``check`` (``check(module)`` or None)
KERNELS: Registry[type[nn.Module], KernelFn] = Registry("GNQ kernel")

# Cap on the elements of one (rows x B*T) block of the ghost form, to bound memory.
_GHOST_BLOCK_ELEMS = 1 << 24


def register_kernel(
    *module_types: type[nn.Module], check: CheckFn | None = None
) -> Callable[[KernelFn], KernelFn]:
    """Decorator registering ``fn(module, a, b, strategy) -> Tensor | None`` for module types.

    ``a`` is the module's first positional input (detached), ``b`` the gradient of the
    loss with respect to its output, both with the batch on dim 0. The function returns
    the (B x B) Gram contribution of the module's trainable parameters (skipping those
    with ``requires_grad=False``) or None. ``check(module)``, if given, is called before
    capturing and should raise ValueError for configurations the kernel cannot handle.
    Registration is by exact type (a subclass may change ``forward``).
    """
    if not module_types:
        raise TypeError("register_kernel needs at least one module type")
    for t in module_types:
        if not (isinstance(t, type) and issubclass(t, nn.Module)):
            raise TypeError(f"register_kernel expects nn.Module subclasses, got {t!r}")

    def deco(fn: KernelFn) -> KernelFn:
        for t in module_types:
            # re-registering a type is allowed: it replaces the kernel (a user's override)
            KERNELS.register(t, fn, replace=True, check=check)
        return fn

    return deco


def _trainable(p: torch.Tensor | None) -> bool:
    return p is not None and p.requires_grad


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


# Largest per-sample gradient block (elements) the "auto" rule will materialise for one
# layer: 2^26 float32 = 256 MiB.
_MATERIALIZE_MAX_ELEMS = 1 << 26


def _use_ghost(T: int, p: int, d: int, strategy: str, B: int = 1, g: int = 1) -> bool:
    """Pick the cheaper exact form for a layer with T positions, p x d weight (per group).

    The design note quoted Li et al.'s memory rule (ghost iff 2 T^2 < p d); we depart from it and
    compare arithmetic instead, because the memory rule sends layers such as ResNet-18's
    layer2 convolutions (T = 256, p d = 147k) to the ghost form at ~100x the FLOPs:
    ghost ~ g (B T)^2 (p + d), per-sample gradients + Gram ~ g B p d (T + B).  The
    per-sample form is only chosen while its block (g B p d elements) stays under
    ``_MATERIALIZE_MAX_ELEMS``, which keeps the memory bound the ghost form exists for.
    """
    if strategy == "ghost":
        return True
    if strategy == "materialize":
        return False
    if g * B * p * d > _MATERIALIZE_MAX_ELEMS:
        return True
    return B * T * T * (p + d) < p * d * (T + B)


# Columns of one float64 block in gram() (2 MiB at batch 32).
_GRAM_BLOCK_COLS = 1 << 13


def gram(X: torch.Tensor) -> torch.Tensor:
    """X X^T of a (B, n) matrix, accumulated in float64 (returns float64, B x B).

    A float32 X X^T errs by about eps32 * sqrt(n) * ||x_i|| ||x_j||.  GNQ lives in the
    small eigen-directions of K + lam I: on a batch of near-duplicates (clusters of rows
    x_i = c + d_i, ||d_i|| << ||c||) they are of size ||d||^2, so that error is amplified
    by ||c||^2 / ||d||^2 (3.5% GNQ error with near-duplicate inputs, noise 1e-3, on the
    quickstart CNN: experiments/gnq_precision.py).  Centring X on its mean before a
    float32 product does not help when the batch holds several clusters (still 1.6%);
    float64 accumulation does (3e-6).  Only this B^2 n product is float64: the rows
    themselves (activations, output gradients, per-sample gradients, whose computation is
    the B n T part of the cost) stay in X's dtype, accurate enough as
    tests/test_gnq_precision.py checks against the float64 reference.
    """
    if X.dtype == torch.float64:
        return X @ X.T
    n = X.shape[1]
    if n <= _GRAM_BLOCK_COLS or X.device.type != "cpu":
        X = X.to(torch.float64)
        return X @ X.T
    # On a CPU a wide X (ResNet-18's per-sample gradients: 32 x 590k) is converted block by
    # block: one float64 copy of the whole of it cost more than the product (page faults
    # on a fresh 150 MB buffer), a cache-sized block does not.
    K = torch.zeros(X.shape[0], X.shape[0], dtype=torch.float64, device=X.device)
    for j in range(0, n, _GRAM_BLOCK_COLS):
        x = X[:, j : j + _GRAM_BLOCK_COLS].to(torch.float64)
        K.addmm_(x, x.T)
    return K


def _weight_gram(A: torch.Tensor, Bm: torch.Tensor, strategy: str) -> torch.Tensor:
    """Exact Gram of per-sample gradients of a weight shared over positions and groups.

    A: (g, B, T, d) inputs, Bm: (g, B, T, p) output gradients; group k's per-sample
    gradient is sum_t Bm[k, i, t]^T A[k, i, t] (p x d). Returns (B x B).
    """
    g, B, T, d = A.shape
    p = Bm.shape[-1]
    if T == 1 and g == 1:
        return gram(A[0, :, 0]).mul_(gram(Bm[0, :, 0]))
    if _use_ghost(T, p, d, strategy, B, g):
        # float64 throughout: the centring of gram() has no analogue over position pairs
        A2 = A.reshape(g, B * T, d).to(torch.float64)
        B2 = Bm.reshape(g, B * T, p).to(torch.float64)
        out = torch.empty(B, B, dtype=torch.float64, device=A.device)
        rows = max(1, _GHOST_BLOCK_ELEMS // max(1, g * T * B * T))
        for i0 in range(0, B, rows):
            i1 = min(B, i0 + rows)
            ga = torch.bmm(A2[:, i0 * T : i1 * T], A2.transpose(1, 2))
            gb = torch.bmm(B2[:, i0 * T : i1 * T], B2.transpose(1, 2))
            out[i0:i1] = ga.mul_(gb).sum(0).view(i1 - i0, T, B, T).sum((1, 3))
        return out
    # (g, B, p, d) per-sample gradients, then per-group Grams summed.
    Gw = torch.matmul(Bm.transpose(-1, -2), A).reshape(g, B, p * d)
    K = gram(Gw[0])
    for k in range(1, g):
        K += gram(Gw[k])
    return K


def _bias_gram(b_sum: torch.Tensor) -> torch.Tensor:
    return gram(b_sum)


# --------------------------------------------------------------------------- Linear


@register_kernel(nn.Linear)
def linear_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """Linear on vectors (B, d) or sequences (B, ..., d): positions T = prod(...)."""
    if a.dim() < 2:
        raise ValueError(
            f"Linear input of shape {tuple(a.shape)} has no batch dimension; "
            "GNQ needs inputs shaped (B, ..., in_features)"
        )
    B = a.shape[0]
    d, p = a.shape[-1], b.shape[-1]
    A = a.reshape(1, B, -1, d)
    Bm = b.reshape(1, B, -1, p)
    K = None
    if _trainable(module.weight):
        K = _weight_gram(A, Bm, strategy)
    if _trainable(module.bias):
        Kb = _bias_gram(Bm[0].sum(1))
        K = Kb if K is None else K.add_(Kb)
    return K


# --------------------------------------------------------------------------- Conv


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
    K = None
    if _trainable(module.weight):
        if _use_ghost(T, p, d, strategy, B, g):
            padded, padding = _conv_padding(module, a)
            K = _conv_ghost(module, padded, bt, padding, strategy)
        else:
            K = gram(conv_per_sample_weight_grads(module, a, b))
    if _trainable(module.bias):
        Kb = gram(bt.sum(2))
        K = Kb if K is None else K.add_(Kb)
    return K


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


# --------------------------------------------------------------------------- Embedding


def _embedding_check(module: nn.Module) -> None:
    if module.scale_grad_by_freq:
        raise ValueError(
            "scale_grad_by_freq=True scales gradients by token counts in the whole "
            "mini-batch, so per-sample gradients are not defined"
        )


@register_kernel(nn.Embedding, check=_embedding_check)
def embedding_kernel(module: nn.Module, a: torch.Tensor, b: torch.Tensor, strategy: str):
    """Embedding: K_ij = sum_{t,s} [idx_it == idx_js] (b_it . b_js), padding_idx excluded.

    Ghost form (T^2 pairs) or per-sample gradients restricted to the U distinct ids of the
    batch (B x U x d), whichever is smaller (ghost when T^2 < U).
    """
    if not _trainable(module.weight):
        return None
    B = b.shape[0]
    dim = module.embedding_dim
    idx = a.reshape(B, -1)
    T = idx.shape[1]
    bt = b.reshape(B, T, dim)
    if module.padding_idx is not None:
        bt = bt * (idx != module.padding_idx).unsqueeze(-1).to(bt.dtype)
    flat_idx = idx.reshape(-1)
    uniq, inv = torch.unique(flat_idx, return_inverse=True)
    U = uniq.numel()
    use_ghost = strategy == "ghost" or (strategy == "auto" and T * T < U)
    if use_ghost:
        B2 = bt.reshape(B * T, dim).to(torch.float64)
        same = (flat_idx.unsqueeze(1) == flat_idx.unsqueeze(0)).to(torch.float64)
        return (same.mul_(B2 @ B2.T)).view(B, T, B, T).sum((1, 3))
    rows = torch.arange(B, device=inv.device).repeat_interleave(T) * U + inv
    Gw = torch.zeros(B * U, dim, dtype=bt.dtype, device=bt.device)
    Gw.index_add_(0, rows, bt.reshape(B * T, dim))
    return gram(Gw.view(B, U * dim))


# --------------------------------------------------------------------------- Norm layers


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
    if not parts:
        return None
    return gram(parts[0] if len(parts) == 1 else torch.cat(parts, 1))


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

    Training-mode BatchNorm is rejected by :func:`check_module` before capture.
    """
    shape = (1, -1) + (1,) * (a.dim() - 2)
    mean = module.running_mean.to(a.dtype).view(shape)
    inv_std = torch.rsqrt(module.running_var.to(a.dtype) + module.eps).view(shape)
    xhat = (a - mean) * inv_std
    return _affine_gram(module, b, xhat, True, module.num_features)


KERNELS.mark_builtin()
