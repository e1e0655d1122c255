"""Res-MIA: a training-free, black-box, resolution-based membership-inference attack.

docs/algorithms.md section 3. Idea: a model that memorised a training sample is confident on it
at full resolution, and that confidence decays faster than on unseen samples when the
image's fine detail is eroded. Erosion step ``k`` (``k = 1..K``)::

    x_k = upsample( adaptive_avg_pool2d(x_0, s_k), size=(H, W) )

always pooled from the original ``x_0`` (never from ``x_{k-1}``), with ``upsample`` the
nearest-neighbour interpolation (``"bilinear"`` is an ablation). With ``f`` the oracle's
softmax output and ``y* = argmax f(x_0)`` (the predicted label; no true label needed),
the confidence curve is ``c_k = f_{y*}(x_k)``, ``k = 0..K``, and the score is

* ``"endpoint"`` (default):  ``S(x) = (c_0 - c_K) / K``
* ``"mean-slope"``:          ``S(x) = (1/K) * sum_{k=1..K} (c_0 - c_k) / k``

The mean of the per-step drops ``c_{k-1} - c_k`` would telescope to the endpoint score,
so "mean-slope" averages the average decay rate from the start over every step: each
intermediate resolution contributes, and early drops weigh more. Higher = more likely a
member. Cost: ``K + 1`` queries per sample, sent as one stream per chunk of samples.

Sizes. A fixed pooling factor re-applied to an already pooled image is idempotent
(pooling 2x2 blocks of an image that is constant on 2x2 blocks changes nothing), so the
pooled sizes must shrink at every step. Default: ``s_k = ceil(H / 2^k)`` for
``k = 1..K``, ``K = floor(log2 H)``; for an 8x8 image ``s = 4, 2, 1`` and the last step is
the per-channel global mean. Non-square ``H x W`` images: each side shrinks on its own,
``s_k = (ceil(H / 2^k), ceil(W / 2^k))``, and ``K = floor(log2 max(H, W))``, so the longer
side keeps shrinking (strictly) after the shorter one has reached 1.

Interpolation: ``torch.nn.functional.interpolate`` with ``mode="nearest"`` (PyTorch's
legacy nearest, source index ``floor(i * s / H)``; for sizes dividing H this is exact
block replication) or ``mode="bilinear", align_corners=False``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from attacks.registry import register_attack
from fedaudit.options import option

__all__ = ["erode", "default_sizes", "resmia_scores", "resmia_attack"]

Size = tuple[int, int]
SizeSpec = int | Sequence[int]

_UPSAMPLE = ("nearest", "bilinear")
_SCORES = ("endpoint", "mean-slope")


def _max_steps(height: int, width: int) -> int:
    return int(math.floor(math.log2(max(height, width))))


def default_sizes(height: int, width: int, steps: int | None = None) -> list[Size]:
    """Default pooled sizes ``(ceil(H / 2^k), ceil(W / 2^k))`` for ``k = 1..steps``.

    ``steps`` defaults to (and must not exceed) ``K = floor(log2 max(H, W))``.
    """
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    k_max = _max_steps(height, width)
    if k_max < 1:
        raise ValueError(f"a {height}x{width} image is too small to erode (needs a side >= 2)")
    if steps is None:
        steps = k_max
    elif isinstance(steps, bool) or not isinstance(steps, Integral) or not 1 <= steps <= k_max:
        raise ValueError(
            f"steps must be an integer in [1, {k_max}] (floor(log2 {max(height, width)})) "
            f"for a {height}x{width} image, got {steps!r}"
        )
    return [
        (math.ceil(height / 2**k), math.ceil(width / 2**k)) for k in range(1, int(steps) + 1)
    ]


def _as_size(spec: Any, index: int) -> Size:
    if isinstance(spec, Integral) and not isinstance(spec, bool):
        return (int(spec), int(spec))
    if (
        isinstance(spec, Sequence)
        and len(spec) == 2
        and all(isinstance(v, Integral) and not isinstance(v, bool) for v in spec)
    ):
        return (int(spec[0]), int(spec[1]))
    raise ValueError(
        f"sizes[{index}] must be an integer or a pair of integers (h, w), got {spec!r}"
    )


def _check_sizes(sizes: Sequence[SizeSpec], height: int, width: int) -> list[Size]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) == 0:
        raise ValueError(f"sizes must be a non-empty list of sizes, got {sizes!r}")
    out = [_as_size(s, i) for i, s in enumerate(sizes)]
    why = (
        "pooled sizes must shrink strictly at every step: re-using a size (a fixed "
        "pooling factor) reproduces the same image, so the step adds a query and no "
        "information"
    )
    for i, (h, w) in enumerate(out):
        if not (1 <= h <= height and 1 <= w <= width) or (h, w) == (height, width):
            raise ValueError(
                f"sizes[{i}] = {sizes[i]!r} must be positive and smaller than the "
                f"{height}x{width} input (pooling to the input size is the identity)"
            )
        if i > 0:
            ph, pw = out[i - 1]
            if h > ph or w > pw or (h, w) == (ph, pw):
                raise ValueError(
                    f"sizes must be strictly decreasing, but sizes[{i}] = {sizes[i]!r} "
                    f"follows sizes[{i - 1}] = {sizes[i - 1]!r}; {why}"
                )
    return out


def _resolve_sizes(
    height: int, width: int, steps: int | None, sizes: Sequence[SizeSpec] | None
) -> list[Size]:
    if sizes is not None:
        if steps is not None:
            raise ValueError("pass either steps or sizes, not both")
        return _check_sizes(sizes, height, width)
    return default_sizes(height, width, steps)


def _check_image_batch(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 4:
        raise ValueError(f"x must have shape (N, C, H, W), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor, got dtype {x.dtype}")


def erode(
    x: torch.Tensor,
    steps: int | None = None,
    sizes: Sequence[SizeSpec] | None = None,
    upsample: Literal["nearest", "bilinear"] = "nearest",
) -> list[torch.Tensor]:
    """Progressive resolution erosion ``[x_0, x_1, ..., x_K]``.

    ``x_k = upsample(adaptive_avg_pool2d(x_0, s_k), size=(H, W))``, every ``x_k`` with the
    shape of ``x`` (``(N, C, H, W)``, floating point); ``x_0`` is ``x`` itself.

    Parameters
    ----------
    steps : int, optional
        Number of erosion steps ``K`` with the default sizes ``s_k = ceil(side / 2^k)``;
        ``1 <= steps <= floor(log2 max(H, W))`` (the default is the maximum).
    sizes : list of int or (h, w), optional
        Explicit pooled sizes ``s_1..s_K`` instead of the default (not with ``steps``);
        an int ``s`` means ``(s, s)``. Each must be positive, at most the input size on
        each side and not equal to it, and the list strictly decreasing (no side grows,
        one side shrinks): re-using a size reproduces the same image (the idempotence
        pitfall).
    upsample : {"nearest", "bilinear"}
        Interpolation back to ``(H, W)``; bilinear uses ``align_corners=False``.
    """
    _check_image_batch(x)
    if upsample not in _UPSAMPLE:
        raise ValueError(f"upsample must be one of {', '.join(_UPSAMPLE)}; got {upsample!r}")
    height, width = int(x.shape[-2]), int(x.shape[-1])
    resolved = _resolve_sizes(height, width, steps, sizes)
    kwargs: dict[str, Any] = {"mode": upsample}
    if upsample == "bilinear":
        kwargs["align_corners"] = False
    out = [x]
    for size in resolved:
        pooled = F.adaptive_avg_pool2d(x, size)
        out.append(F.interpolate(pooled, size=(height, width), **kwargs))
    return out


def resmia_scores(
    oracle: Any,
    x: torch.Tensor | np.ndarray,
    *,
    steps: int | None = None,
    sizes: Sequence[SizeSpec] | None = None,
    upsample: Literal["nearest", "bilinear"] = "nearest",
    score: Literal["endpoint", "mean-slope"] = "endpoint",
    return_curves: bool = False,
    chunk_size: int | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Res-MIA scores for a batch of images ``x`` ``(N, C, H, W)``.

    Queries ``oracle.predict_proba`` on ``x_0..x_K`` (see :func:`erode`): ``K + 1``
    queries per sample. Samples are processed in chunks of ``chunk_size`` (default: about
    one oracle batch, ``oracle.batch_size // (K + 1)``), each chunk's eroded copies
    concatenated into one query stream.

    Returns ``scores`` (``(N,)`` float64), or ``(scores, curves)`` when
    ``return_curves``; ``curves[i, k] = f_{y*}(x_k)`` of sample ``i``, shape ``(N, K+1)``.
    """
    if score not in _SCORES:
        raise ValueError(f"score must be one of {', '.join(_SCORES)}; got {score!r}")
    if upsample not in _UPSAMPLE:
        raise ValueError(f"upsample must be one of {', '.join(_UPSAMPLE)}; got {upsample!r}")
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise ValueError(f"x must be numeric, got dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    _check_image_batch(x)
    height, width = int(x.shape[-2]), int(x.shape[-1])
    resolved = _resolve_sizes(height, width, steps, sizes)
    k = len(resolved)
    if chunk_size is None:
        chunk_size = max(1, int(getattr(oracle, "batch_size", 256)) // (k + 1))
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, Integral) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")

    n = int(x.shape[0])
    curves = np.empty((n, k + 1), dtype=np.float64)
    with torch.no_grad():
        for start in range(0, n, chunk_size):
            xb = x[start : start + chunk_size]
            b = int(xb.shape[0])
            stream = torch.cat(erode(xb, sizes=resolved, upsample=upsample), dim=0)
            proba = np.asarray(oracle.predict_proba(stream), dtype=np.float64)
            proba = proba.reshape(k + 1, b, -1)  # level-major, as concatenated
            y_star = proba[0].argmax(axis=1)
            curves[start : start + b] = proba[:, np.arange(b), y_star].T

    drop = curves[:, :1] - curves[:, 1:]  # c_0 - c_k, k = 1..K
    if score == "endpoint":
        scores = drop[:, -1] / k
    else:
        scores = np.mean(drop / np.arange(1, k + 1), axis=1)
    if return_curves:
        return scores, curves
    return scores


def _check_size_option(sizes: list[int]) -> str | None:
    if any(s < 1 for s in sizes):
        return "sizes must be positive integers"
    if any(b >= a for a, b in zip(sizes, sizes[1:])):
        return "sizes must strictly decrease (a fixed size re-applied is idempotent)"
    return None


#: the scenario's ``[attack.resmia]`` table; 0 steps / no sizes = the defaults above
RESMIA_OPTIONS = {
    "steps": option(int, 0, "erosion steps K (0 = floor(log2 H))", min=0, unset=0),
    "sizes": option(list, [], "explicit pooling sizes (strictly decreasing)",
                    item_types=(int,), check=_check_size_option, unset=[]),
    "upsample": option(str, "nearest", "restoration interpolation",
                       choices=("nearest", "bilinear")),
    "score": option(str, "endpoint", "confidence-decay statistic",
                    choices=("endpoint", "mean-slope")),
}


def _queries(shape: Sequence[int], steps: int | None = None, sizes=None, **_: Any) -> int:
    """K + 1 oracle queries per sample."""
    return len(_resolve_sizes(int(shape[-2]), int(shape[-1]), steps, sizes)) + 1


@register_attack("resmia", label="Res-MIA", options=RESMIA_OPTIONS, cost=_queries)
def resmia_attack(
    oracle: Any,
    x: torch.Tensor | np.ndarray,
    y: Any = None,
    *,
    steps: int | None = None,
    sizes: Sequence[SizeSpec] | None = None,
    upsample: Literal["nearest", "bilinear"] = "nearest",
    score: Literal["endpoint", "mean-slope"] = "endpoint",
    chunk_size: int | None = None,
) -> np.ndarray:
    """Registered Res-MIA attack; ``y`` is unused (Res-MIA uses ``argmax f(x_0)``)."""
    return resmia_scores(
        oracle, x, steps=steps, sizes=sizes, upsample=upsample, score=score,
        chunk_size=chunk_size,
    )
