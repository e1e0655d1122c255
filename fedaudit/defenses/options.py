"""The ``[defense]`` options the built-in defenses declare (shared declarations: a key
several defenses read is declared once, so the schema's ``[defense]`` table is their
union -- :func:`fedaudit.config.schema`)."""

from __future__ import annotations

from fedaudit.options import option


def _check_delta(value: float) -> str | None:
    return None if 0.0 < value < 1.0 else "out of range, must be > 0 and < 1"


NOISE_MULTIPLIER = option(
    float, 1.0, "Gaussian noise std / clip_norm (dp-sgd: per step on the summed clipped "
    "per-sample gradients; dp-server / dp-client: on the sum of clipped updates)", min=0.0)
CLIP_NORM = option(
    float, 1.0, "dp-sgd: per-sample gradient max L2 norm; dp-server / dp-client / clip: max "
    "L2 norm of a client's model update", min=0.0, min_exclusive=True)
DELTA = option(
    float, 1e-5, "the delta at which epsilon is reported (0 < delta < 1; take it below "
    "1 / (samples per client) for dp-sgd, below 1 / num_clients for dp-server / dp-client)",
    check=_check_delta)

#: the options of a Gaussian-mechanism defense
GAUSSIAN = {"noise_multiplier": NOISE_MULTIPLIER, "clip_norm": CLIP_NORM, "delta": DELTA}
