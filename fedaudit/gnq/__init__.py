"""Gradient Uniqueness (GNQ) in batch space with ghost kernels.

GNQ (Abdelghafar, Aliakbarpour, Jermaine, arXiv 2510.10902) of sample j in a batch with
per-sample gradients g_1..g_B:

    GNQ_j = g_j^T (sum_{k != j} g_k g_k^T + lam I)^{-1} g_j = h_j / (1 - h_j),
    h = diag((K + lam I)^{-1} K),  K = G G^T.

K is built per layer from hooked activations and output gradients without materialising
G (the ghost trick of Li et al., arXiv 2110.05679), exactly also for sequences and
convolutions. See docs/algorithms.md section 1.

Public API: :func:`gnq_scores`, :func:`gnq_from_gram`, :func:`gnq_of_updates`,
:class:`GhostAuditor`, :data:`KERNELS`, :func:`register_kernel`.
"""

from .auditor import GhostAuditor
from .core import DEFAULT_LAM, DEFAULT_RHO, gnq_from_gram, gnq_from_gram_options, gnq_of_updates
from .kernels import KERNELS, register_kernel
from .reference import naive_gnq_from_gradients, per_sample_gradients
from .scores import gnq_scores

__all__ = [
    "DEFAULT_LAM",
    "DEFAULT_RHO",
    "GhostAuditor",
    "KERNELS",
    "gnq_from_gram",
    "gnq_from_gram_options",
    "gnq_of_updates",
    "gnq_scores",
    "naive_gnq_from_gradients",
    "per_sample_gradients",
    "register_kernel",
]
