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
by arithmetic, with a memory cap (:func:`fedaudit.gnq.ghost._use_ghost` says why).
Flattening positions into the feature axis (as the reference code of arXiv 2510.10902
does) is not exact when T > 1 and is not used.

The registry :data:`KERNELS` maps an exact module type to its kernel (like Opacus'
``grad_sample`` registry); :func:`register_kernel` adds one. A module type that owns
trainable parameters and is not registered is rejected with a ValueError, as is any
BatchNorm in training mode (its per-sample gradients do not exist: every sample's output
depends on the whole batch).

This module is the table; the code lives, one module per layer family, in

* :mod:`fedaudit.gnq.registry`: :data:`KERNELS`, :func:`register_kernel`, the checks;
* :mod:`fedaudit.gnq.ghost`: :func:`gram` (float64) and the two exact forms;
* :mod:`fedaudit.gnq.kernels_linear`, :mod:`~fedaudit.gnq.kernels_conv`,
  :mod:`~fedaudit.gnq.kernels_embedding`, :mod:`~fedaudit.gnq.kernels_norm`: the
  built-in kernels, each registered next to its code.
"""

from __future__ import annotations

from .ghost import _use_ghost, gram  # noqa: F401
from .registry import (KERNELS, STRATEGIES, CheckFn, KernelFn, Strategy,  # noqa: F401
                       check_batch_statistics, check_module, find_kernel, register_kernel)

# The built-in kernels register on import, in this order (the order KERNELS lists).
from .kernels_linear import linear_kernel  # noqa: F401  # isort: skip
from .kernels_conv import (  # noqa: F401  # isort: skip
    conv_kernel, conv_materializes, conv_output_positions, conv_per_sample_weight_grads)
from .kernels_embedding import embedding_kernel  # noqa: F401  # isort: skip
from .kernels_norm import (  # noqa: F401  # isort: skip
    batchnorm_eval_kernel, groupnorm_kernel, layernorm_kernel)

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
