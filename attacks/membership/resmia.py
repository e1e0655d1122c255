"""Res-MIA: a training-free, black-box, resolution-based membership-inference attack.

docs/algorithms.md section 3. Idea: a model that memorised a training sample is confident on it
at full resolution, and that confidence decays faster than on unseen samples when the
image's fine detail is eroded. Erosion step ``k`` (``k = 1..K``)::

    x_k = upsample( adaptive_avg_pool2d(x_0, s_k), size=(H, W) )

always pooled from the original ``x_0`` (never from ``x_{k-1}``), with ``upsample`` the
nearest-neighbour interpolation (``"bilinear"`` is an ablation). With ``f`` the oracle's
softmax output and ``y* = argmax f(x_0)`` (the predicted label; no true label needed;
``label="given"`` uses the given (true) label ``y`` instead, an ablation), the confidence curve is
``c_k = phi(f(x_k), y*)``, ``k = 0..K``, with ``phi(p, y) = p_y`` (``scale="probability"``,
the paper) or LiRA's logit ``phi(p, y) = log p_y - log sum_{y' != y} p_y'``
(``scale="logit"``: raw confidence saturates near 1 for members, the logit keeps them
apart), and the score is

* ``"endpoint"`` (default):  ``S(x) = (c_0 - c_K) / K``
* ``"mean-slope"``:          ``S(x) = (1/K) * sum_{k=1..K} (c_0 - c_k) / k``

The mean of the per-step drops ``c_{k-1} - c_k`` would telescope to the endpoint score,
so "mean-slope" averages the average decay rate from the start over every step: each
intermediate resolution contributes, and early drops weigh more. Higher = more likely a
member. Cost: ``K + 1`` queries per sample, sent as one stream per chunk of samples.

The erosion itself (the pooled sizes, the milder schedules, the interpolation) is in
:mod:`attacks.membership.erosion`; its public names are importable from here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any, Literal

import numpy as np
import torch

from attacks.membership.erosion import (
    _UPSAMPLE,
    ErosionSchedule,
    SizeSpec,
    _check_image_batch,
    _resolve_sizes,
    default_sizes,
    erode,
    schedule_sizes,
)
from attacks.membership.reference_signals import logit_confidence
from attacks.membership.registry import AttackCurves, register_attack
from fedaudit.options import option

__all__ = ["ErosionSchedule", "erode", "default_sizes", "schedule_sizes", "resmia_scores",
           "resmia_attack"]

_SCORES = ("endpoint", "mean-slope")
_LABELS = ("predicted", "given")
#: the earlier spelling of "given" (a bare true on the command line is a TOML boolean)
_LABEL_ALIASES = {"true": "given"}
_SCALES = ("probability", "logit")


def resmia_scores(
    oracle: Any,
    x: torch.Tensor | np.ndarray,
    *,
    steps: int | None = None,
    sizes: Sequence[SizeSpec] | None = None,
    upsample: Literal["nearest", "bilinear"] = "nearest",
    score: Literal["endpoint", "mean-slope"] = "endpoint",
    label: Literal["predicted", "given"] = "predicted",
    labels: Any = None,
    scale: Literal["probability", "logit"] = "probability",
    factor: float = 2.0,
    min_size: int = 1,
    return_curves: bool = False,
    chunk_size: int | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Res-MIA scores for a batch of images ``x`` ``(N, C, H, W)``.

    Queries ``oracle.predict_proba`` on ``x_0..x_K`` (see :func:`erode`): ``K + 1``
    queries per sample. Samples are processed in chunks of ``chunk_size`` (default: about
    one oracle batch, ``oracle.batch_size // (K + 1)``), each chunk's eroded copies
    concatenated into one query stream.

    ``label``: ``"predicted"`` (the paper: ``y* = argmax f(x_0)``) or ``"given"`` (``y* =
    labels``, the true labels, required then). ``scale``: ``"probability"`` (the paper:
    ``c_k = f_{y*}(x_k)``) or ``"logit"`` (``c_k = log f_{y*}(x_k) - log sum_{y' != y*}
    f_{y'}(x_k)``, :func:`attacks.membership.reference_signals.logit_confidence`). ``steps``, ``sizes``,
    ``factor``, ``min_size``, ``upsample``: see :func:`erode`.

    Returns ``scores`` (``(N,)`` float64), or ``(scores, curves)`` when
    ``return_curves``; ``curves[i, k] = c_k`` of sample ``i``, shape ``(N, K+1)``.
    """
    if score not in _SCORES:
        raise ValueError(f"score must be one of {', '.join(_SCORES)}; got {score!r}")
    if upsample not in _UPSAMPLE:
        raise ValueError(f"upsample must be one of {', '.join(_UPSAMPLE)}; got {upsample!r}")
    label = _LABEL_ALIASES.get(label, label)
    if label not in _LABELS:
        raise ValueError(f"label must be one of {', '.join(_LABELS)}; got {label!r}")
    if scale not in _SCALES:
        raise ValueError(f"scale must be one of {', '.join(_SCALES)}; got {scale!r}")
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise ValueError(f"x must be numeric, got dtype {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    _check_image_batch(x)
    height, width = int(x.shape[-2]), int(x.shape[-1])
    resolved = _resolve_sizes(height, width, steps, sizes, factor, min_size)
    k = len(resolved)
    n = int(x.shape[0])
    true_y = None
    if label == "given":
        true_y = _check_true_labels(labels, n)
    if chunk_size is None:
        chunk_size = max(1, int(getattr(oracle, "batch_size", 256)) // (k + 1))
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, Integral) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")

    curves = np.empty((n, k + 1), dtype=np.float64)
    with torch.no_grad():
        for start in range(0, n, chunk_size):
            xb = x[start : start + chunk_size]
            b = int(xb.shape[0])
            stream = torch.cat(erode(xb, sizes=resolved, upsample=upsample), dim=0)
            proba = np.asarray(oracle.predict_proba(stream), dtype=np.float64)
            proba = proba.reshape(k + 1, b, -1)  # level-major, as concatenated
            if true_y is None:
                y_star = proba[0].argmax(axis=1)
            else:
                y_star = true_y[start : start + b]
                if start == 0:
                    _check_label_range(true_y, proba.shape[-1])
            if scale == "logit":
                curves[start : start + b] = logit_confidence(proba, y_star).T
            else:
                curves[start : start + b] = proba[:, np.arange(b), y_star].T

    drop = curves[:, :1] - curves[:, 1:]  # c_0 - c_k, k = 1..K
    if score == "endpoint":
        scores = drop[:, -1] / k
    else:
        scores = np.mean(drop / np.arange(1, k + 1), axis=1)
    if return_curves:
        return scores, curves
    return scores


def _check_true_labels(labels: Any, n: int) -> np.ndarray:
    if labels is None:
        raise ValueError('label = "given" needs the true labels (labels=...)')
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    y = np.asarray(labels)
    if y.shape != (n,) or (y.size and y.dtype.kind not in "iu"):
        raise ValueError(f"labels must be {n} integer class labels, got shape {y.shape} "
                         f"dtype {y.dtype}")
    return y.astype(np.int64, copy=False)


def _check_label_range(y: np.ndarray, classes: int) -> None:
    # a negative label would silently index from the end of the class axis
    bad = np.flatnonzero((y < 0) | (y >= classes))
    if bad.size:
        raise ValueError(f"labels must be in [0, {classes}) (the oracle's classes); "
                         f"labels[{bad[0]}] = {y[bad[0]]}")


def _check_size_option(sizes: list[int]) -> str | None:
    if any(s < 1 for s in sizes):
        return "sizes must be positive integers"
    if any(b >= a for a, b in zip(sizes, sizes[1:])):
        return "sizes must strictly decrease (a fixed size re-applied is idempotent)"
    return None


#: the scenario's ``[attack.resmia]`` table; defaults = the paper's attack (0 steps / no
#: sizes = the schedule's own length / no explicit sizes)
RESMIA_OPTIONS = {
    "steps": option(int, 0, "erosion steps K: the first K sizes of the schedule (0 = all: "
                    "floor(log2 H) for the default halving)", min=0, unset=0),
    "sizes": option(list, [], "explicit pooling sizes (strictly decreasing; not with "
                    "factor / min_size)", item_types=(int,), check=_check_size_option, unset=[]),
    "factor": option(float, 2.0, "shrink factor per erosion step (> 1; 2 = the paper's "
                     "halving, < 2 = milder steps)", min=1.0, min_exclusive=True, unset=2.0),
    "min_size": option(int, 1, "stop the schedule at this longer-side size (1 = down to the "
                       "channel means, the paper)", min=1, unset=1),
    "upsample": option(str, "nearest", "restoration interpolation",
                       choices=_UPSAMPLE),
    "score": option(str, "endpoint", "confidence-decay statistic",
                    choices=_SCORES),
    "label": option(str, "predicted", "class whose confidence is tracked: predicted on the "
                    "original image (the paper, label-free) or given: the sample's true "
                    "label (the earlier spelling 'true' is accepted)",
                    choices=_LABELS, aliases=_LABEL_ALIASES),
    "scale": option(str, "probability", "confidence scale: the softmax probability (the "
                    "paper) or its logit log p - log(1 - p)", choices=_SCALES),
}


def _queries(shape: Sequence[int], steps: int | None = None, sizes=None, factor: float = 2.0,
             min_size: int = 1, **_: Any) -> int:
    """K + 1 oracle queries per sample."""
    return len(_resolve_sizes(int(shape[-2]), int(shape[-1]), steps, sizes, factor,
                              min_size)) + 1


def _confidence_curves(oracle: Any, x: Any, y: Any = None, *, score: str = "endpoint",
                       scale: str = "probability", **options: Any) -> np.ndarray:
    """The (N, K + 1) softmax confidence curves ``c_0..c_K`` with the attack's options
    (``score`` and ``scale`` do not enter: the figure shows the softmax confidence)."""
    return resmia_scores(oracle, x, labels=y, return_curves=True, **options)[1]


def _erosion_ticks(shape: Sequence[int], options: Mapping[str, Any], k: int) -> list[str] | None:
    """``step (size x size)`` tick labels when the sizes are known (explicit ``sizes``
    or the default halving), else None."""
    explicit = options.get("sizes")
    if not (isinstance(shape, list) and len(shape) >= 2 and isinstance(shape[-1], int)):
        return None
    h = int(shape[-1])
    if isinstance(explicit, list) and explicit and len(explicit) == k - 1:
        sizes = [h, *explicit]
    elif not explicit:
        sizes = [h] + [math.ceil(h / 2 ** i) for i in range(1, k)]
    else:
        return None
    return [f"{i}\n({s}x{s})" for i, s in enumerate(sizes)]


#: the confidence decay Res-MIA's score summarises (the ``attack-curves`` stage, the report)
RESMIA_CURVES = AttackCurves(
    _confidence_curves, title="Res-MIA confidence decay",
    guide="Confidence in the predicted class as the image is eroded step by step (left; "
          "step 0 is the original image) and the member minus non-member gap (right): "
          "Res-MIA scores membership by how much faster members lose confidence.",
    xlabel="erosion step k (image size)", ylabel="mean confidence f_y*(x_k)",
    ylim=(0.0, 1.02), ticks=_erosion_ticks)


@register_attack("resmia", label="Res-MIA", options=RESMIA_OPTIONS, cost=_queries,
                 curves=RESMIA_CURVES, gnq_link=True, order=100)
def resmia_attack(
    oracle: Any,
    x: torch.Tensor | np.ndarray,
    y: Any = None,
    *,
    steps: int | None = None,
    sizes: Sequence[SizeSpec] | None = None,
    factor: float = 2.0,
    min_size: int = 1,
    upsample: Literal["nearest", "bilinear"] = "nearest",
    score: Literal["endpoint", "mean-slope"] = "endpoint",
    label: Literal["predicted", "given"] = "predicted",
    scale: Literal["probability", "logit"] = "probability",
    chunk_size: int | None = None,
) -> np.ndarray:
    """Registered Res-MIA attack; ``y`` (the true labels) is used only with
    ``label="given"`` (the paper's Res-MIA tracks ``argmax f(x_0)``)."""
    return resmia_scores(
        oracle, x, steps=steps, sizes=sizes, factor=factor, min_size=min_size,
        upsample=upsample, score=score, label=label, labels=y if _LABEL_ALIASES.get(label, label) == "given" else None,
        scale=scale, chunk_size=chunk_size,
    )
