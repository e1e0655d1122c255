"""Reconstruction metrics: how well an attack on updates rebuilt a client's images
(docs/algorithms.md section 14).

Pure functions over numpy arrays in the style of ``sklearn.metrics``: input checks first,
then the math; each bad input fails with one ``ValueError`` line naming the argument.

Conventions
-----------
* **Images** come as a batch, channels first: ``(N, C, H, W)``, or ``(N, H, W)`` for one
  channel. Any real dtype; every computation is in float64. Two arrays compared sample by
  sample (``psnr``, ``ssim``) have the same shape; a reconstruction batch and the true
  samples it is matched to share the shape of one sample.
* **data_range** is the interval the pixel values lie in: a pair ``(lo, hi)`` (an
  ``UpdateCase.box``) or one number ``L`` for ``[0, L]``. Its width ``L = hi - lo`` is the
  peak of PSNR and sets SSIM's constants. A value outside it is an error, compared in the
  array's own precision (a float32 image clamped to ``float32(lo)`` is inside).
* **Orientation.** Higher means better rebuilt (more leakage): ``psnr`` (dB; ``+inf`` for
  an exact copy), ``ssim`` (at most 1; 1 for an exact copy), ``identifiable`` (True),
  ``label_correct`` (True), ``leakage`` (> 0: the reconstruction is closer to the sample
  than the data-free prior is). The costs and distances ``"mse"`` (mean squared pixel
  difference) and ``"ssim"`` (negative SSIM) are lower for closer images.
* **SSIM** is Wang et al. 2004's: an 11x11 Gaussian window of standard deviation 1.5 over
  every position where it fits (no padding), population (co)variances, ``C1 = (0.01 L)^2``,
  ``C2 = (0.03 L)^2``; per channel, then the mean over channels (each channel is an image
  of its own, as in ``skimage``'s ``channel_axis``). Images smaller than 11x11 need an
  explicit ``win_size`` (odd, 3 to 11): the same Gaussian shape scaled down, standard
  deviation ``1.5 (win_size - 1) / 10``.
* **The true samples** are the audit's ground truth (the client's samples of the round);
  an attack never sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment
from skimage.metrics import structural_similarity

from fedaudit.image_metrics.pooled import (EXACT_PSNR_CAP, PooledReconstructionMetrics,
                                           pool_metrics, ssim_window)

__all__ = ["EXACT_PSNR_CAP", "PooledReconstructionMetrics", "ReconstructionMetrics",
           "identifiability", "match", "pool_metrics", "prior_leakage", "psnr",
           "reconstruction_metrics", "ssim", "ssim_window"]

DEFAULT_WIN_SIZE = 11  # Wang et al. 2004, section III.C: 11x11 Gaussian, sigma 1.5


def _box(data_range) -> tuple[float, float]:
    """``(lo, hi)`` of ``data_range`` (a number L means ``(0, L)``), checked."""
    def real(v) -> bool:
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)

    if real(data_range):
        lo, hi = 0.0, float(data_range)
    elif (isinstance(data_range, (tuple, list, np.ndarray)) and len(data_range) == 2
          and all(real(v) for v in data_range)):
        lo, hi = float(data_range[0]), float(data_range[1])
    else:
        lo = hi = float("nan")
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"data_range must be a positive number L (values in [0, L]) or an "
                         f"interval (lo, hi) with lo < hi, both finite; got {data_range!r}")
    return lo, hi


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _values(a: np.ndarray, name: str, box: tuple[float, float]) -> np.ndarray:
    """Check dtype, finiteness and the box of ``a``; return it as float64."""
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {a.dtype}")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        bad = ~np.isfinite(a)
        raise ValueError(f"{name} must be finite; {int(bad.sum())} value(s) are NaN or infinite "
                         f"(first at index {_first(bad)}: {a[bad][0]})")
    # bounds in the array's precision: a float32 image clamped to the box holds float32(lo)
    lo, hi = (np.asarray(b, dtype=a.dtype if a.dtype.kind == "f" else np.float64) for b in box)
    out = (a < lo) | (a > hi)
    if out.any():
        raise ValueError(f"{name} must lie in data_range [{box[0]}, {box[1]}]; "
                         f"{int(out.sum())} value(s) outside (first at index {_first(out)}: "
                         f"{a[out][0]})")
    return a.astype(np.float64)


def _images(x: ArrayLike, name: str, box: tuple[float, float]) -> np.ndarray:
    """Check one batch of images; return it as float64 ``(N, C, H, W)``."""
    a = np.asarray(x)
    if a.ndim not in (3, 4):
        raise ValueError(f"{name} must be a batch of images (N, C, H, W) or (N, H, W), got an "
                         f"array of shape {a.shape}")
    if 0 in a.shape:
        raise ValueError(f"{name} must hold at least one non-empty image, got shape {a.shape}")
    a = _values(a, name, box)
    return a[:, None] if a.ndim == 3 else a


def _batches(a: ArrayLike, b: ArrayLike, names: tuple[str, str], box, *,
             same_n: bool) -> tuple[np.ndarray, np.ndarray]:
    x, y = _images(a, names[0], box), _images(b, names[1], box)
    if np.ndim(a) != np.ndim(b) or x.shape[1:] != y.shape[1:]:
        raise ValueError(f"{names[0]} and {names[1]} must hold images of the same shape, got "
                         f"{np.shape(a)} and {np.shape(b)}")
    if same_n and x.shape[0] != y.shape[0]:
        raise ValueError(f"{names[0]} and {names[1]} must hold the same number of images, got "
                         f"{x.shape[0]} and {y.shape[0]}")
    return x, y


def _win(win_size: int | None, shape: tuple[int, ...]) -> int:
    h, w = shape[-2:]
    if win_size is None:
        if min(h, w) < DEFAULT_WIN_SIZE:
            top = min(h, w) - (1 - min(h, w) % 2)
            hint = (f"pass win_size, an odd number from 3 to {top}" if top >= 3
                    else "SSIM needs images of at least 3x3")
            raise ValueError(f"images are {h}x{w}, smaller than SSIM's 11x11 Gaussian window "
                             f"(Wang et al. 2004); {hint}")
        return DEFAULT_WIN_SIZE
    if (isinstance(win_size, bool) or not isinstance(win_size, (int, np.integer))
            or win_size % 2 == 0 or not 3 <= win_size <= DEFAULT_WIN_SIZE):
        raise ValueError(f"win_size must be an odd integer from 3 to 11, got {win_size!r}")
    if win_size > min(h, w):
        raise ValueError(f"win_size={win_size} exceeds the images' {h}x{w}")
    return int(win_size)


def _ssim_pair(x: np.ndarray, y: np.ndarray, width: float, win: int) -> float:
    """SSIM of two ``(C, H, W)`` float64 images: scikit-image with Wang et al.'s settings.

    ``gaussian_weights`` filters with ``scipy.ndimage`` at ``truncate = 3.5``: radius
    ``int(3.5 sigma + 0.5)``, which is ``(win - 1) / 2`` for ``sigma = 1.5 (win - 1) / 10``
    and win <= 11; ``win_size = win`` crops exactly the positions where that window fits,
    so the reflected border never enters the mean. Population covariance as in the paper
    (scikit-image's default divides by n - 1, which has no meaning for weighted windows).
    """
    return float(structural_similarity(
        x, y, data_range=width, channel_axis=0, gaussian_weights=True,
        sigma=1.5 * (win - 1) / 10, win_size=win, use_sample_covariance=False))


def psnr(a: ArrayLike, b: ArrayLike, data_range) -> np.ndarray:
    """Peak signal-to-noise ratio of each pair ``(a[i], b[i])``, in dB.

    ``PSNR = 10 log10(L^2 / MSE)``, ``MSE`` the mean of ``(a[i] - b[i])^2`` over all
    channels and pixels, ``L = hi - lo`` of ``data_range``; ``+inf`` where ``MSE = 0``
    (identical images). As breaching's ``psnr_compute(..., batched=False)`` per image.
    """
    box = _box(data_range)
    x, y = _batches(a, b, ("a", "b"), box, same_n=True)
    mse = ((x - y) ** 2).reshape(x.shape[0], -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10((box[1] - box[0]) ** 2 / mse)


def ssim(a: ArrayLike, b: ArrayLike, data_range, *, win_size: int | None = None) -> np.ndarray:
    """Mean structural similarity of each pair ``(a[i], b[i])`` (Wang et al. 2004).

    Per window (eq. 13): ``SSIM(x, y) = (2 mu_x mu_y + C1)(2 sigma_xy + C2) /
    ((mu_x^2 + mu_y^2 + C1)(sigma_x^2 + sigma_y^2 + C2))``, the product of luminance,
    contrast and structure with ``C3 = C2 / 2``; ``C1 = (0.01 L)^2``, ``C2 = (0.03 L)^2``;
    means and (co)variances under a Gaussian window (11x11, sigma 1.5, or ``win_size``:
    see the module docstring); MSSIM (eq. 17) = the mean over window positions, then over
    channels. Computed by ``skimage.metrics.structural_similarity``.

    Wang, Bovik, Sheikh, Simoncelli, "Image quality assessment: from error visibility to
    structural similarity", IEEE TIP 13(4), 2004."""
    box = _box(data_range)
    x, y = _batches(a, b, ("a", "b"), box, same_n=True)
    win = _win(win_size, x.shape)
    width = box[1] - box[0]
    return np.array([_ssim_pair(x[i], y[i], width, win) for i in range(x.shape[0])])


def _mse_matrix(r: np.ndarray, t: np.ndarray, width: float, win: int | None) -> np.ndarray:
    tf = t.reshape(t.shape[0], -1)
    return np.stack([((tf - ri.reshape(-1)) ** 2).mean(axis=1) for ri in r])


def _neg_ssim_matrix(r: np.ndarray, t: np.ndarray, width: float, win: int | None) -> np.ndarray:
    return -np.array([[_ssim_pair(ri, tj, width, win) for tj in t] for ri in r])


#: by name: the (N, M) distances of the reconstructions to the true samples
_DISTANCES: dict[str, Callable[..., np.ndarray]] = {"mse": _mse_matrix, "ssim": _neg_ssim_matrix}


def _distances(name: str, arg: str, r: np.ndarray, t: np.ndarray, box,
               win_size: int | None) -> np.ndarray:
    if name not in _DISTANCES:
        raise ValueError(f"{arg} must be one of {sorted(_DISTANCES)}, got {name!r}")
    win = _win(win_size, r.shape) if name == "ssim" else None
    return _DISTANCES[name](r, t, box[1] - box[0], win)


def _rec_true(reconstructed, true, box, true_name: str = "true") -> tuple[np.ndarray, np.ndarray]:
    r, t = _batches(reconstructed, true, ("reconstructed", true_name), box, same_n=False)
    if r.shape[0] > t.shape[0]:
        raise ValueError(f"cannot match {r.shape[0]} reconstructions one to one to "
                         f"{t.shape[0]} true samples: need at least as many true samples")
    return r, t


def match(reconstructed: ArrayLike, true: ArrayLike, data_range, *, cost: str = "mse",
          win_size: int | None = None) -> np.ndarray:
    """The true sample matched to each reconstruction: an optimal one-to-one assignment.

    Minimises ``sum_i cost(reconstructed[i], true[matched[i]])`` over injective maps of the
    N reconstructions into the M >= N true samples (``scipy.optimize.linear_sum_assignment``
    on the N x M cost matrix; the Hungarian-type solver, so never a greedy choice).
    ``cost``: ``"mse"`` (mean squared pixel difference, default) or ``"ssim"`` (negative
    SSIM, i.e. the largest total SSIM). breaching orders a batch the same way on LPIPS
    (``analysis.compute_batch_order``). Returns ``matched``, int64 of shape (N,).
    """
    box = _box(data_range)
    r, t = _rec_true(reconstructed, true, box)
    return _assign(_distances(cost, "cost", r, t, box, win_size))


def _assign(cost: np.ndarray) -> np.ndarray:
    rows, cols = linear_sum_assignment(cost)
    matched = np.empty(cost.shape[0], dtype=np.int64)
    matched[rows] = cols
    return matched


def _matched(matched: ArrayLike, n: int, m: int) -> np.ndarray:
    k = np.asarray(matched)
    if k.shape != (n,) or k.dtype.kind not in "iu":
        raise ValueError(f"matched must hold one integer index per reconstruction, shape "
                         f"({n},), got dtype {k.dtype} and shape {k.shape}")
    if np.any((k < 0) | (k >= m)):
        bad = int(np.flatnonzero((k < 0) | (k >= m))[0])
        raise ValueError(f"matched must index the {m} true samples (0 to {m - 1}); "
                         f"matched[{bad}] = {k[bad]}")
    if np.unique(k).size != n:
        raise ValueError("matched must be a one-to-one assignment (distinct indices), "
                         "as match() returns")
    return k.astype(np.int64)


def identifiability(reconstructed: ArrayLike, true: ArrayLike, matched: ArrayLike, data_range,
                    *, distance: str = "mse", win_size: int | None = None) -> np.ndarray:
    """Per reconstruction: is its matched true sample the nearest of all true samples?

    ``identifiable[i] = d(r_i, t_matched[i]) <= min_j d(r_i, t_j)`` over the given true
    samples (the client's of the round), ``d`` = ``distance`` (``"mse"``, the order of
    breaching's pixel L2 distance, or ``"ssim"``, negative SSIM). A tie counts as
    identified (a duplicate of the true sample is as good as it). The fraction identified
    is the image identifiability precision (IIP) of Yin et al. 2021, "See through
    Gradients: Image Batch Recovery via GradInversion", as breaching's
    ``image_identifiability_precision``; breaching searches the whole dataset among the
    reconstruction's label, here the pool is ``true``.
    """
    box = _box(data_range)
    r, t = _rec_true(reconstructed, true, box)
    k = _matched(matched, r.shape[0], t.shape[0])
    return _nearest_is_matched(_distances(distance, "distance", r, t, box, win_size), k)


def _nearest_is_matched(d: np.ndarray, matched: np.ndarray) -> np.ndarray:
    return d[np.arange(d.shape[0]), matched] <= d.min(axis=1)


def _leakage(rec_ssim: np.ndarray, prior_ssim: np.ndarray) -> np.ndarray:
    out = np.full(rec_ssim.shape, np.nan)
    pos = prior_ssim > 0
    out[pos] = (rec_ssim[pos] - prior_ssim[pos]) / prior_ssim[pos]
    return out


def _prior(prior: ArrayLike, sample_shape: tuple[int, ...], box) -> np.ndarray:
    """Check the prior image (one sample's shape); return it as float64 ``(C, H, W)``."""
    p = np.asarray(prior)
    if p.shape != sample_shape:
        raise ValueError(f"prior must be one image of the samples' shape {sample_shape}, "
                         f"got shape {p.shape}")
    p = _values(p, "prior", box)
    return p[None] if p.ndim == 2 else p


def prior_leakage(reconstructed: ArrayLike, true_matched: ArrayLike, prior: ArrayLike,
                  data_range, *, win_size: int | None = None) -> np.ndarray:
    """Relative data leakage of each reconstruction over a data-free prior (NVFlare).

    ``leakage[i] = (SSIM(r_i, t_i) - SSIM(p, t_i)) / SSIM(p, t_i)``: the SSIM the attack
    gained over the prior image ``p`` (the dataset-mean image), relative to the prior's;
    > 0 when the reconstruction is closer to the sample than the prior. NaN where
    ``SSIM(p, t_i) <= 0`` (the ratio is undefined or flips sign). The relative data leakage
    value (RDLV) of Hatamizadeh et al. 2023, "Do Gradient Inversion Attacks Make Federated
    Learning Unsafe?" (arXiv:2202.06924), NVFlare's research/quantifying-data-leakage
    (``RelativeDataLeakageValueFilter.compute_rdlv``), which keeps per true image the largest
    value over all reconstructions; here each reconstruction counts against its matched
    sample ``true_matched[i]`` (``true[match(...)]``), with this module's SSIM.
    """
    box = _box(data_range)
    r, t = _batches(reconstructed, true_matched, ("reconstructed", "true_matched"), box,
                    same_n=True)
    p = _prior(prior, np.shape(reconstructed)[1:], box)
    win = _win(win_size, r.shape)
    width = box[1] - box[0]
    rec = np.array([_ssim_pair(ri, ti, width, win) for ri, ti in zip(r, t)])
    pri = np.array([_ssim_pair(p, ti, width, win) for ti in t])
    return _leakage(rec, pri)


@dataclass(frozen=True, eq=False)  # arrays: no element-wise == between records
class ReconstructionMetrics:
    """Per reconstruction i, against its matched true sample ``matched[i]`` (arrays of
    shape (N,), read-only). ``leakage = (ssim - prior_ssim) / prior_ssim`` where
    ``prior_ssim > 0``, else NaN.  ``candidates``: the true samples identification chose
    among (1: ``identifiable`` holds trivially; 0: not given)."""

    matched: np.ndarray        # int64: index into the true samples
    psnr: np.ndarray           # float64, dB
    ssim: np.ndarray           # float64
    prior_ssim: np.ndarray     # float64: SSIM of the prior with the matched true sample
    leakage: np.ndarray        # float64, NaN where undefined
    identifiable: np.ndarray   # bool
    label_correct: np.ndarray  # bool
    candidates: int = 0

    def __post_init__(self) -> None:
        arrays = [f for f in fields(self) if f.name != "candidates"]
        n = {f.name: np.shape(getattr(self, f.name)) for f in arrays}
        if len(set(n.values())) != 1 or len(next(iter(n.values()))) != 1:
            raise ValueError(f"ReconstructionMetrics needs 1-D arrays of one length, got {n}")
        for f in arrays:  # a read-only copy: the record cannot change under its reader
            a = np.array(getattr(self, f.name))
            a.setflags(write=False)
            object.__setattr__(self, f.name, a)

    def pooled(self) -> PooledReconstructionMetrics:
        """These reconstructions pooled (:func:`pool_metrics`)."""
        return pool_metrics([self])


def _labels(labels: ArrayLike, name: str, n: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.shape != (n,) or y.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold one integer label per image, shape ({n},), got "
                         f"dtype {y.dtype} and shape {y.shape}")
    return y.astype(np.int64)


def reconstruction_metrics(reconstructed: ArrayLike, rec_labels: ArrayLike,
                           true_images: ArrayLike, true_labels: ArrayLike, prior: ArrayLike,
                           data_range, *, cost: str = "mse", distance: str = "mse",
                           win_size: int | None = None) -> ReconstructionMetrics:
    """Every metric of one client's reconstructions in one round.

    The N reconstructions (with their labels: the attack's, guessed or given) are matched
    to the client's M >= N true samples of the round by :func:`match` (``cost``); then per
    reconstruction: :func:`psnr`, :func:`ssim` against the matched sample,
    :func:`identifiability` (``distance``), whether its label is the matched sample's, the
    prior's SSIM and :func:`prior_leakage` (``prior``: the dataset-mean image).
    """
    box = _box(data_range)
    r, t = _rec_true(reconstructed, true_images, box, "true_images")
    rl = _labels(rec_labels, "rec_labels", r.shape[0])
    tl = _labels(true_labels, "true_labels", t.shape[0])
    p = _prior(prior, np.shape(reconstructed)[1:], box)
    win = _win(win_size, r.shape)  # SSIM is always computed: check the window first
    width = box[1] - box[0]
    cost_matrix = _distances(cost, "cost", r, t, box, win)
    matched = _assign(cost_matrix)
    near = (cost_matrix if distance == cost
            else _distances(distance, "distance", r, t, box, win))  # N x M SSIMs cost time
    tm = t[matched]
    rec = np.array([_ssim_pair(ri, ti, width, win) for ri, ti in zip(r, tm)])
    pri = np.array([_ssim_pair(p, ti, width, win) for ti in tm])
    return ReconstructionMetrics(
        matched=matched, psnr=psnr(r, tm, box), ssim=rec, prior_ssim=pri,
        leakage=_leakage(rec, pri), identifiable=_nearest_is_matched(near, matched),
        label_correct=rl == tl[matched], candidates=int(t.shape[0]))
