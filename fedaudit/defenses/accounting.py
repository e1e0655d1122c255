"""Privacy accounting math for the defenses (no Flower here; each defense in
:mod:`fedaudit.defenses` composes its results.json summary from these).

Two guarantees are accounted, both with Opacus' Renyi-DP accountant
(:class:`opacus.accountants.RDPAccountant`, its default orders 1.1 .. 63, and its RDP ->
(epsilon, delta) conversion):

``dp-sgd`` -- sample-level DP of each client's local data set.
    Every client runs DP-SGD (Opacus, Poisson sampling: each local step includes every
    sample independently with probability q = 1 / ceil(n_client / batch_size), the rate
    Opacus derives from the DataLoader, so one local epoch is n_client samples on
    average).  Each step is a Poisson-subsampled Gaussian mechanism with noise multiplier
    sigma on the sum of per-sample gradients clipped to ``clip_norm``.  A client's data is
    touched only by its own steps, so its epsilon composes (RDP) over ALL the local steps
    of ALL the rounds it trained in: (sigma, q, total steps).  The server's aggregation and
    everything after it are post-processing.  Neighbouring data sets differ by adding or
    removing one sample of that client.

``dp-server`` / ``dp-client`` -- client-level DP of the released global models.
    Flower's fixed-clipping wrappers clip every client's update to ``clip_norm`` (on the
    server or on the client), average the m sampled clients' clipped updates with uniform
    weights and add N(0, (sigma * clip_norm / m)^2) to every coordinate: a Gaussian
    mechanism with noise multiplier sigma on the sum.  One release per round that produced
    an aggregate; no amplification by client sampling is claimed (Flower's accountant
    supports only that mode for these wrappers), i.e. every release composes at full
    cost.  Neighbouring federations differ by adding or removing one client's data.

Neither guarantee covers what the testbed itself sends next to the model update: the
``train-loss`` and ``num-examples`` metrics and, when ``audit.gnq.client`` is on, the
per-sample GNQ scores with their sample ids.  They are an auditing side channel of this
testbed, outside the accounted mechanism.

With ``noise_multiplier = 0`` (or ``kind = "clip"``) there is no noise and epsilon is
infinite: results.json writes the string ``"inf"`` and a note, never NaN.
"""

from __future__ import annotations

import math
import warnings


def rdp_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Epsilon at ``delta`` of ``steps`` compositions of the sampled Gaussian mechanism
    (sampling rate ``sample_rate``; 1.0 = no sampling / no amplification), by Opacus'
    RDP accountant.  0 steps -> 0.0; no noise -> inf."""
    from opacus.accountants import RDPAccountant

    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if not 0.0 < sample_rate <= 1.0:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps!r}")
    if steps == 0:
        return 0.0
    if noise_multiplier <= 0.0:
        return math.inf
    acc = RDPAccountant()
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    with warnings.catch_warnings():
        # "optimal order is the smallest alpha": the epsilon is then a (loose, huge) upper
        # bound -- still valid, and what Opacus' own accountant reports
        warnings.filterwarnings("ignore", message=".*[Oo]ptimal order.*")
        eps = float(acc.get_epsilon(delta=delta))
    return eps if not math.isnan(eps) else math.inf


def dpsgd_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Sample-level epsilon of one client after ``steps`` DP-SGD steps in total (all
    rounds) at Poisson rate ``sample_rate``."""
    return rdp_epsilon(noise_multiplier, sample_rate, steps, delta)


def gaussian_epsilon(noise_multiplier: float, releases: int, delta: float) -> float:
    """Client-level epsilon of ``releases`` Gaussian releases without amplification."""
    return rdp_epsilon(noise_multiplier, 1.0, releases, delta)


def json_epsilon(eps: float | None) -> float | str | None:
    """results.json form: a float, the string "inf", or None."""
    if eps is None:
        return None
    return "inf" if math.isinf(eps) else float(eps)
