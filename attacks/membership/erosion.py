"""Resolution erosion for Res-MIA (:mod:`attacks.membership.resmia`): the pooled sizes and the images.

docs/algorithms.md section 3. Erosion step ``k`` (``k = 1..K``)::

    x_k = upsample( adaptive_avg_pool2d(x_0, s_k), size=(H, W) )

always pooled from the original ``x_0`` (never from ``x_{k-1}``), with ``upsample`` the
nearest-neighbour interpolation (``"bilinear"`` is an ablation); :func:`erode` returns
``[x_0, x_1, ..., x_K]``.

Sizes. A fixed pooling factor re-applied to an already pooled image is idempotent
(pooling 2x2 blocks of an image that is constant on 2x2 blocks changes nothing), so the
pooled sizes must shrink at every step. Default (the paper): ``s_k = ceil(H / 2^k)`` for
``k = 1..K``, ``K = floor(log2 H)``; for an 8x8 image ``s = 4, 2, 1`` and the last step is
the per-channel global mean. Non-square ``H x W`` images: each side shrinks on its own,
``s_k = (ceil(H / 2^k), ceil(W / 2^k))``, and ``K = floor(log2 max(H, W))``, so the longer
side keeps shrinking (strictly) after the shorter one has reached 1.

Milder schedules (:class:`ErosionSchedule`, an ablation): a shrink factor ``r > 1`` per
step and a smallest size ``m``, ``s_k = (ceil(H / r^k), ceil(W / r^k))`` for every ``k >= 1``
with ``max(H, W) / r^k >= m``, a size equal to the one before it (or to the input) left
out; ``r = 2, m = 1`` is the default above. ``steps`` keeps the first ``K'`` sizes.

Interpolation: ``torch.nn.functional.interpolate`` with ``mode="nearest"`` (PyTorch's
legacy nearest, source index ``floor(i * s / H)``; for sizes dividing H this is exact
block replication) or ``mode="bilinear", align_corners=False``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral, Real
from typing import Any, Literal

import torch
import torch.nn.functional as F

__all__ = ["ErosionSchedule", "erode", "default_sizes", "schedule_sizes"]

Size = tuple[int, int]
SizeSpec = int | Sequence[int]

_UPSAMPLE = ("nearest", "bilinear")


def _max_steps(height: int, width: int) -> int:
    return int(math.floor(math.log2(max(height, width))))


def _check_image(height: int, width: int) -> None:
    """An image size that can be eroded: positive integers, a side of at least 2."""
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if max(height, width) < 2:
        raise ValueError(f"a {height}x{width} image is too small to erode (needs a side >= 2)")


@dataclass(frozen=True)
class ErosionSchedule:
    """Which pooled sizes the erosion visits: shrink ``factor`` r > 1 per step, smallest
    size ``min_size`` m >= 1 of the longer side, at most ``steps`` steps (None = all).

    ``s_k = (ceil(H / r^k), ceil(W / r^k))`` for each ``k >= 1`` with
    ``max(H, W) / r^k >= m``; a size equal to the previous one (or to the input) is left
    out (it would re-query the same image). The default ``ErosionSchedule()`` is the
    paper's halving down to 1x1. ``factor < 2`` erodes more gently (more, closer steps);
    ``min_size > 1`` stops before the image is reduced to its channel means. The
    arithmetic is exact (:class:`fractions.Fraction` of the float ``factor``), so a size
    never depends on the rounding of ``r^k``.
    """

    factor: float = 2.0
    min_size: int = 1
    steps: int | None = None

    def __post_init__(self) -> None:
        f = self.factor
        if isinstance(f, bool) or not isinstance(f, Real) or not math.isfinite(f) or f <= 1:
            raise ValueError(f"factor must be a finite number > 1, got {f!r}")
        m = self.min_size
        if isinstance(m, bool) or not isinstance(m, Integral) or m < 1:
            raise ValueError(f"min_size must be a positive integer, got {m!r}")
        k = self.steps
        if k is not None and (isinstance(k, bool) or not isinstance(k, Integral) or k < 1):
            raise ValueError(f"steps must be a positive integer or None, got {k!r}")

    def sizes(self, height: int, width: int) -> list[Size]:
        """The pooled sizes ``s_1..s_K`` for an ``height x width`` image."""
        _check_image(height, width)
        longer = max(height, width)
        r = Fraction(self.factor)
        out: list[Size] = []
        previous = (height, width)
        scale = r
        while Fraction(longer) / scale >= self.min_size:
            size = (math.ceil(Fraction(height) / scale), math.ceil(Fraction(width) / scale))
            if size != previous:
                out.append(size)
                previous = size
            scale *= r
        if not out:
            raise ValueError(
                f"min_size = {self.min_size} leaves no erosion step for a {height}x{width} "
                f"image with factor {self.factor:g} (needs max(H, W) / factor >= min_size)")
        k_max = len(out)
        if self.steps is not None:
            if self.steps > k_max:
                raise ValueError(
                    f"steps must be an integer in [1, {k_max}] (the schedule with factor "
                    f"{self.factor:g}, min_size {self.min_size} has {k_max} steps) for a "
                    f"{height}x{width} image, got {self.steps!r}")
            out = out[: self.steps]
        return out


def schedule_sizes(height: int, width: int, *, factor: float = 2.0, min_size: int = 1,
                   steps: int | None = None) -> list[Size]:
    """``ErosionSchedule(factor, min_size, steps).sizes(height, width)``."""
    return ErosionSchedule(factor, min_size, steps).sizes(height, width)


def default_sizes(height: int, width: int, steps: int | None = None) -> list[Size]:
    """Default pooled sizes ``(ceil(H / 2^k), ceil(W / 2^k))`` for ``k = 1..steps``.

    ``steps`` defaults to (and must not exceed) ``K = floor(log2 max(H, W))``.
    """
    _check_image(height, width)
    k_max = _max_steps(height, width)
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
    height: int, width: int, steps: int | None, sizes: Sequence[SizeSpec] | None,
    factor: float = 2.0, min_size: int = 1,
) -> list[Size]:
    if sizes is not None:
        if steps is not None:
            raise ValueError("pass either steps or sizes, not both")
        if factor != 2.0 or min_size != 1:
            raise ValueError("pass either explicit sizes or a schedule (factor, min_size), "
                             "not both")
        return _check_sizes(sizes, height, width)
    if factor == 2.0 and min_size == 1:
        return default_sizes(height, width, steps)
    return schedule_sizes(height, width, factor=factor, min_size=min_size, steps=steps)


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
    *,
    factor: float = 2.0,
    min_size: int = 1,
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
    factor, min_size : float, int
        A milder schedule (:class:`ErosionSchedule`): shrink by ``factor`` per step down to
        a longer side of ``min_size``; ``steps`` then counts that schedule's steps. Not
        with ``sizes``. The defaults (2, 1) are the paper's halving to 1x1.
    """
    _check_image_batch(x)
    if upsample not in _UPSAMPLE:
        raise ValueError(f"upsample must be one of {', '.join(_UPSAMPLE)}; got {upsample!r}")
    height, width = int(x.shape[-2]), int(x.shape[-1])
    resolved = _resolve_sizes(height, width, steps, sizes, factor, min_size)
    kwargs: dict[str, Any] = {"mode": upsample}
    if upsample == "bilinear":
        kwargs["align_corners"] = False
    out = [x]
    for size in resolved:
        pooled = F.adaptive_avg_pool2d(x, size)
        out.append(F.interpolate(pooled, size=(height, width), **kwargs))
    return out
