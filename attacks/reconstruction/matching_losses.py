"""The distances between a simulated and an observed update, and the image prior, that
the gradient-inversion attacks minimise.

Both distances take the two updates as sequences of tensors, one per trainable parameter
(in ``named_parameters`` order), and per-parameter weights w_i (Geiping et al.'s
``weights``: equal, or decreasing from the first layer, :func:`parameter_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["WEIGHTINGS", "cosine_distance", "parameter_weights", "squared_l2",
           "total_variation"]

#: the per-parameter weightings of Geiping et al.'s code (``inversefed`` ``weights=``)
WEIGHTINGS = ("equal", "linear", "exp")


def parameter_weights(kind: str, n: int, *,
                      dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
    """Weights w_0..w_{n-1} of the n parameter tensors (first layer first), as Geiping et
    al.'s code defines them: ``equal`` w_i = 1 (returned as None, the distances' default);
    ``linear`` w_i = (n - i) / n; ``exp`` w_i = exp(-i) (their softmax over n, n-1, ..., 1
    divided by its first entry)."""
    if kind == "equal":
        return None
    i = torch.arange(n, dtype=dtype)
    if kind == "linear":
        return (n - i) / n
    if kind == "exp":
        return torch.exp(-i)
    raise ValueError(f"weighting {kind!r}: allowed {', '.join(WEIGHTINGS)}")


def cosine_distance(simulated: Sequence[torch.Tensor], observed: Sequence[torch.Tensor],
                    weights: torch.Tensor | None = None) -> torch.Tensor:
    """1 - cosine similarity of the two updates over all parameters together (Geiping et
    al. 2020, "Inverting Gradients -- How easy is it to break privacy in federated
    learning?", NeurIPS 2020, their objective with per-layer weights):

        1 - sum_i w_i <s_i, o_i> / ( sqrt(sum_i w_i ||s_i||^2) sqrt(sum_i w_i ||o_i||^2) )

    In [0, 2]; invariant to the scale of either update (the learning rate need not be
    known for a single gradient)."""
    _check(simulated, observed)
    if weights is None:  # no products by 1: this runs once per attack iteration
        dot = sum((s * o).sum() for s, o in zip(simulated, observed))
        ns = sum(s.pow(2).sum() for s in simulated)
        no = sum(o.pow(2).sum() for o in observed)
    else:
        w = _weights(weights, len(observed))
        dot = sum(wi * (s * o).sum() for wi, s, o in zip(w, simulated, observed))
        ns = sum(wi * s.pow(2).sum() for wi, s in zip(w, simulated))
        no = sum(wi * o.pow(2).sum() for wi, o in zip(w, observed))
    return 1 - dot / (ns.sqrt() * no.sqrt())


def squared_l2(simulated: Sequence[torch.Tensor], observed: Sequence[torch.Tensor],
               weights: torch.Tensor | None = None) -> torch.Tensor:
    """The squared Euclidean distance sum_i w_i ||s_i - o_i||^2 (Zhu et al. 2019, "Deep
    Leakage from Gradients", NeurIPS 2019: their objective is w_i = 1)."""
    _check(simulated, observed)
    if weights is None:
        return sum((s - o).pow(2).sum() for s, o in zip(simulated, observed))
    w = _weights(weights, len(observed))
    return sum(wi * (s - o).pow(2).sum() for wi, s, o in zip(w, simulated, observed))


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Anisotropic total variation of a batch of images (N, C, H, W), as Geiping et al.'s
    code computes it: mean |x[..., h, w+1] - x[..., h, w]| + mean |x[..., h+1, w] -
    x[..., h, w]| (means over all pixels of the batch)."""
    if x.ndim != 4:
        raise ValueError(f"total variation needs images (N, C, H, W), got shape "
                         f"{tuple(x.shape)}")
    dx = (x[..., :, 1:] - x[..., :, :-1]).abs().mean()
    dy = (x[..., 1:, :] - x[..., :-1, :]).abs().mean()
    return dx + dy


def _weights(weights: torch.Tensor, n: int) -> torch.Tensor:
    if len(weights) != n:
        raise ValueError(f"{len(weights)} weights for {n} parameter tensors")
    return weights


def _check(simulated: Sequence[torch.Tensor], observed: Sequence[torch.Tensor]) -> None:
    if len(simulated) != len(observed) or not observed:
        raise ValueError(f"{len(simulated)} simulated against {len(observed)} observed "
                         "parameter tensors: need the same non-zero number")
    for i, (s, o) in enumerate(zip(simulated, observed)):
        if s.shape != o.shape:
            raise ValueError(f"parameter {i}: simulated {tuple(s.shape)} against observed "
                             f"{tuple(o.shape)}")
