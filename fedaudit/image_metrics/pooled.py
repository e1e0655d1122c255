"""Reconstruction metrics pooled over many reconstructions: the one pooling the
reconstruction stage (each case and each method over all cases) and the malicious server's
read-back report (docs/algorithms.md section 14), and the SSIM gain's verdict
(:func:`gain_verdict`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedaudit.verdicts import Rule, Verdict, clustered_mean, decide

__all__ = ["EXACT_PSNR_CAP", "SSIM_GAIN_RULE", "PooledReconstructionMetrics", "gain_verdict",
           "pool_metrics", "ssim_window"]

#: a reconstruction is judged on its SSIM gain over the data-free prior (the train split's
#: mean image): within 0.05 of it is no leak, below it no leak either
SSIM_GAIN_RULE = Rule(delta=0.05, two_sided=False, figure="SSIM gain over the prior")


def ssim_window(shape: tuple[int, ...]) -> int:
    """The SSIM window the audits use for images of ``shape`` (``(..., H, W)``): Wang et
    al.'s 11 x 11, or the largest odd one that fits smaller images (the digits' 8 x 8: 7)."""
    side = min(shape[-2:])
    return 11 if side >= 11 else side - 1 + side % 2


#: the PSNR (dB) an exact reconstruction (infinite PSNR) counts as in a median: far above
#: any inexact float32 image (a one-ulp error on a 32 x 32 image is about 150 dB)
EXACT_PSNR_CAP = 300.0


@dataclass(frozen=True)
class PooledReconstructionMetrics:
    """:class:`fedaudit.image_metrics.ReconstructionMetrics` pooled over ``n``
    reconstructions (of one case or of many: :func:`pool_metrics`), the one pooling the
    reconstruction and imprint stages report.

    ``psnr`` is the mean over the inexact reconstructions (finite PSNR; None if there are
    none), ``exact`` counts the exact ones apart (an infinite PSNR would swamp the mean);
    ``psnr_median`` is the median with the exact ones at :data:`EXACT_PSNR_CAP`;
    ``psnr_sd`` and ``ssim_sd`` are the spread (sample standard deviation, ddof 1) of the
    inexact PSNRs and of the SSIMs (None with fewer than two);
    ``ssim_gain`` is the mean of ``ssim - prior_ssim`` (the SSIM gained over the prior),
    ``verdict`` its :func:`gain_verdict` (clustered by client; the most exposed client) and
    ``ssim_gain_ci`` the verdict's 95 % interval of the mean (None when there is none);
    ``identifiability`` is the share identified among the records with more than one
    true sample (a client of one sample identifies trivially; None when every record had
    one); ``leakage`` is the mean over the ``n_leakage`` reconstructions where it is defined
    (None if none).  Every mean is over the concatenated float64 values."""

    n: int
    psnr: float | None
    exact: int
    psnr_median: float | None
    psnr_sd: float | None
    ssim: float | None
    ssim_sd: float | None
    prior_ssim: float | None
    ssim_gain: float | None
    identifiability: float | None
    label_accuracy: float | None
    leakage: float | None
    n_leakage: int
    ssim_gain_ci: tuple[float, float] | None = None
    verdict: Verdict | None = None

    def as_dict(self) -> dict[str, Any]:
        """The results.json form (``reconstruction.pooled`` and each case's entry):
        ``{"samples": 0}`` when nothing was reconstructed."""
        if not self.n:
            return {"samples": 0}
        return {"samples": self.n, "psnr": self.psnr, "exact": self.exact, "ssim": self.ssim,
                "prior_ssim": self.prior_ssim, "ssim_gain": self.ssim_gain,
                "identifiability": self.identifiability,
                "label_accuracy": self.label_accuracy, "leakage": self.leakage,
                "leakage_samples": self.n_leakage, "psnr_sd": self.psnr_sd,
                "ssim_sd": self.ssim_sd,
                **({"ssim_gain_ci": list(self.ssim_gain_ci)}
                   if self.ssim_gain_ci is not None else {}),
                **({"verdict": self.verdict.outcome, "verdict_detail": self.verdict.as_dict()}
                   if self.verdict is not None else {})}


def _sd(x: np.ndarray) -> float | None:
    return float(x.std(ddof=1)) if len(x) >= 2 else None


def gain_verdict(gains: np.ndarray, clients: np.ndarray, images: np.ndarray) -> Verdict:
    """The SSIM gain's verdict (:data:`SSIM_GAIN_RULE`): the mean gain over every
    reconstruction, clustered by client (``clients``: a client's images over its rounds
    are one unit; :func:`fedaudit.verdicts.clustered_mean`), and each client's mean gain
    over its own images (``images``: the true sample each reconstruction matched; a
    client's rounds of one image are one unit) where it has two or more, Holm over them
    (:func:`fedaudit.verdicts.decide`).  With one client, its images are the units."""
    g = np.asarray(gains, dtype=np.float64)
    cl, im = np.asarray(clients), np.asarray(images)
    bounds = (-2.0, 2.0)  # an SSIM lies in [-1, 1]
    if len(np.unique(cl)) < 2:
        return decide(SSIM_GAIN_RULE, clustered_mean(g, im, chance=0.0, unit="image",
                                                     bounds=bounds))
    pooled = clustered_mean(g, cl, chance=0.0, unit="client", bounds=bounds)
    others = []
    for k in np.unique(cl):
        sel = cl == k
        if len(np.unique(im[sel])) >= 2:
            e = clustered_mean(g[sel], im[sel], chance=0.0, unit="image", bounds=bounds)
            others.append(_scoped(e, f"client {int(k)}"))
    return decide(SSIM_GAIN_RULE, pooled, others)


def _scoped(e: Any, scope: str) -> Any:
    from dataclasses import replace

    return replace(e, scope=scope)


def _identifiability(metrics: Sequence[Any]) -> float | None:
    """The share identified among the records whose true samples were more than one (a
    reconstruction among one candidate is identified trivially); None when none was."""
    kept = [np.asarray(m.identifiable, dtype=np.float64) for m in metrics
            if getattr(m, "candidates", 0) != 1]
    kept = [k for k in kept if len(k)]
    return float(np.concatenate(kept).mean()) if kept else None


def pool_metrics(metrics: Sequence[Any], clients: Sequence[int] | None = None,
                 images: Sequence[np.ndarray] | None = None) -> PooledReconstructionMetrics:
    """Every reconstruction of ``metrics`` (:class:`fedaudit.image_metrics.ReconstructionMetrics`
    records) pooled (:class:`PooledReconstructionMetrics`); ``clients``: each record's
    client (by default each record its own), ``images``: each record's true sample per
    reconstruction (by default each reconstruction its own image), the units of the SSIM
    gain's verdict (:func:`gain_verdict`)."""
    if not metrics:
        return PooledReconstructionMetrics(0, None, 0, None, None, None, None, None, None,
                                           None, None, None, 0)

    def cat(key: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(m, key), dtype=np.float64) for m in metrics])

    psnr_, ssim_, prior = cat("psnr"), cat("ssim"), cat("prior_ssim")
    leak = cat("leakage")
    finite, defined = np.isfinite(psnr_), ~np.isnan(leak)
    sizes = [len(np.asarray(m.psnr)) for m in metrics]
    who = np.repeat(np.arange(len(metrics)) if clients is None else np.asarray(clients), sizes)
    what = (np.concatenate([np.asarray(i, dtype=np.int64) for i in images]) if images is not None
            else np.concatenate([np.full(n, r) * (1 << 32) + np.arange(n)
                                 for r, n in enumerate(sizes)]))
    if len(who) != len(psnr_) or len(what) != len(psnr_):
        raise ValueError(f"clients and images must give one entry per reconstruction "
                         f"({len(psnr_)}), got {len(who)} and {len(what)}")
    verdict = gain_verdict(ssim_ - prior, who, what) if len(psnr_) else None
    ci = None if verdict is None else verdict.headline.interval
    return PooledReconstructionMetrics(
        n=int(len(psnr_)), psnr=float(psnr_[finite].mean()) if finite.any() else None,
        exact=int((~finite).sum()),
        psnr_median=float(np.median(np.minimum(psnr_, EXACT_PSNR_CAP))),
        psnr_sd=_sd(psnr_[finite]), ssim=float(ssim_.mean()), ssim_sd=_sd(ssim_),
        prior_ssim=float(prior.mean()),
        ssim_gain=float((ssim_ - prior).mean()),
        identifiability=_identifiability(metrics),
        label_accuracy=float(cat("label_correct").mean()),
        leakage=float(leak[defined].mean()) if defined.any() else None,
        n_leakage=int(defined.sum()), ssim_gain_ci=None if ci is None else tuple(ci),
        verdict=verdict)
