"""Privacy accounting of the ``[defense]`` section (no Flower here).

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
from typing import Any, Iterable

ACCOUNTED_KINDS = ("dp-sgd", "dp-server", "dp-client")


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


def _dp_sgd_per_client(rounds: Iterable[dict], num_clients: int) -> tuple[list[int], list[float | None]]:
    steps = [0] * num_clients
    rates: list[float | None] = [None] * num_clients
    for rec in rounds:
        for pid, s in (rec.get("dp_steps") or {}).items():
            c = int(pid)
            steps[c] += int(s)
            q = float(rec["dp_sample_rate"][pid])
            if rates[c] is not None and abs(rates[c] - q) > 1e-12:
                raise ValueError(f"client {c}: DP-SGD sample rate changed between rounds "
                                 f"({rates[c]} -> {q}); the accounting assumes one rate")
            rates[c] = q
    return steps, rates


def defense_summary(scenario: dict, rounds: list[dict], *, num_sampled: int | None = None,
                    extra_trajectories: int = 0) -> dict[str, Any]:
    """results.json ``defense``: kind, parameters, epsilon, delta, accounting, notes.

    ``rounds`` are the rounds.jsonl records of the released trajectory (with ``dp_steps``
    / ``dp_sample_rate`` per client under dp-sgd and ``aggregated`` per round).
    """
    d = scenario["defense"]
    kind = d["kind"]
    n_clients = scenario["federation"]["num_clients"]
    sigma = 0.0 if kind == "clip" else float(d["noise_multiplier"])
    out: dict[str, Any] = {"kind": kind}
    if kind == "none":
        out.update({"noise_multiplier": None, "clip_norm": None, "delta": None,
                    "epsilon": None, "accounting": "no defense: nothing accounted"})
        return out
    delta = float(d["delta"])
    out.update({"noise_multiplier": sigma, "clip_norm": float(d["clip_norm"]), "delta": delta})
    notes: list[str] = []
    if kind == "dp-sgd":
        steps, rates = _dp_sgd_per_client(rounds, n_clients)
        per = [None if rates[c] is None else dpsgd_epsilon(sigma, rates[c], steps[c], delta)
               for c in range(n_clients)]
        finite = [e for e in per if e is not None]
        eps = max(finite) if finite else None
        out["epsilon"] = json_epsilon(eps)
        out["epsilon_per_client"] = [json_epsilon(e) for e in per]
        out["steps_per_client"] = steps
        out["sample_rate_per_client"] = rates
        out["accounting"] = (
            "sample-level (epsilon, delta)-DP of each client's local data (add/remove one "
            "sample), Opacus RDP accountant over all local DP-SGD steps of all rounds the "
            f"client trained in, Poisson sampling at q = 1/ceil(n_client/batch_size), "
            f"noise multiplier {sigma:g}, per-sample clip {d['clip_norm']:g}; epsilon = the "
            "largest client's")
        if eps is not None and math.isinf(eps):
            notes.append("noise_multiplier = 0: per-sample clipping only, no noise, so no "
                         "finite epsilon (inf)")
    elif kind in ("dp-server", "dp-client"):
        releases = sum(1 for r in rounds if r.get("aggregated"))
        eps = gaussian_epsilon(sigma, releases, delta)
        out["epsilon"] = json_epsilon(eps)
        out["releases"] = releases
        out["num_sampled_clients"] = num_sampled
        where = "server" if kind == "dp-server" else "client"
        out["accounting"] = (
            "client-level (epsilon, delta)-DP of the released global models (add/remove one "
            f"client), {where}-side fixed clipping of updates to {d['clip_norm']:g}, uniform "
            f"mean of the sampled clients + Gaussian noise std = {sigma:g} * clip / "
            f"sampled clients, composed over {releases} releases (rounds with an aggregate) "
            "with Opacus' RDP accountant, no amplification by client sampling")
        if math.isinf(eps):
            notes.append("noise_multiplier = 0: update clipping only, no noise, so no "
                         "finite epsilon (inf)")
    else:  # clip
        out["epsilon"] = "inf"
        out["accounting"] = ("server-side update clipping to clip_norm (Flower's "
                             "DifferentialPrivacyServerSideFixedClipping with noise 0), "
                             "uniform client weights; no noise, so no DP guarantee")
        notes.append("clipping alone gives no finite epsilon (inf)")
    if kind in ("dp-server", "clip"):
        notes.append("server-side update GNQ and update_norm in rounds.jsonl are computed "
                     "on the updates as received, i.e. BEFORE the server clips them")
    if kind == "dp-client":
        notes.append("server-side update GNQ and update_norm see the client-clipped updates")
    if kind == "dp-sgd":
        notes.append("server-side update GNQ sees the noised DP-SGD updates; client-side "
                     "GNQ is computed on the clipped per-sample gradients")
    if kind in ACCOUNTED_KINDS:
        notes.append("not covered: the train-loss / num-examples metrics and the client-side "
                     "GNQ scores that the testbed sends next to the update (audit channel)")
    if extra_trajectories:
        notes.append(f"epsilon is that of the released trajectory; the {extra_trajectories} "
                     "extra training seed(s) pooled into r_Qn are separate trainings on the "
                     "same data whose privacy cost is not composed here")
    out["notes"] = notes
    return out
