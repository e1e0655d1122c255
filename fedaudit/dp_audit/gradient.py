"""White-box gradient canaries of the DP-SGD audit (``audit.dp.level = "gradient"``).

The auditor's white-box setting of Steinke, Nasr & Jagielski 2023 (Section 7, "Dirac
canaries"): canary j is a virtual sample of client c_j whose clipped gradient is
``clip_norm * e_{k_j}``, one coordinate k_j of the model's trainable parameters (drawn
without replacement, so no two canaries share one).  Each canary is included with
probability 1/2 (:func:`draw_gradient_canaries`); an included one is a sample of its client's
data set like any other: at every DP-SGD step Poisson sampling draws it with the step's
rate q, and when drawn its gradient joins the sum of the clipped per-sample gradients
BEFORE the noise (:func:`fedaudit.training.local.train_local_dpsgd`).  Adding or removing
one such canary is a neighbouring data set of the client's, so the accountant's
sample-level guarantee covers it exactly.

Score: SGD moves the parameter against the gradient, so the score of canary j is minus the
change of coordinate k_j -- on each update its client sent, against the other clients'
mean change of that coordinate (:func:`update_scores`, the server's view: what local
DP-SGD's guarantee covers, the whole transcript being post-processing of each client's
DP-SGD releases and of data independent of the canary) or on the global model (w_T - w_0,
after averaging over clients, :func:`global_scores`).
Pure numpy: the clients import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["GradientCanaries", "ParamLayout", "CanaryReader", "canaries_for_model",
           "draw_gradient_canaries", "global_scores", "update_scores"]

#: mixed into the scenario seed: independent of every other draw
_SEED_TAG = 31_2025


@dataclass(frozen=True)
class ParamLayout:
    """The model's trainable parameters in ``model.parameters()`` order: their names (the
    state_dict keys) and sizes; a canary coordinate indexes their concatenation."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, model) -> "ParamLayout":
        named = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
        return cls(tuple(n for n, _ in named), tuple(int(s) for _, s in named))

    @property
    def total(self) -> int:
        return int(sum(self.sizes))

    def locate(self, coords: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(parameter index, flat index within it, position in ``coords``) per parameter
        holding any of ``coords``."""
        coords = np.asarray(coords, dtype=np.int64)
        ends = np.cumsum(self.sizes)
        which = np.searchsorted(ends, coords, side="right")
        out = []
        for p in np.unique(which):
            pos = np.flatnonzero(which == p)
            start = ends[p] - self.sizes[p]
            out.append((int(p), coords[pos] - start, pos))
        return out


@dataclass(frozen=True)
class GradientCanaries:
    """The drawn gradient canaries (arrays of length m, in canary order)."""

    coord: np.ndarray  # int64: the coordinate of the concatenated trainable parameters
    client: np.ndarray  # int64: the client whose data set it belongs to (included or not)
    included: np.ndarray  # bool

    @property
    def m(self) -> int:
        return int(len(self.coord))

    def of_client(self, c: int) -> np.ndarray:
        """The coordinates of client ``c``'s INCLUDED canaries (what its DP-SGD adds)."""
        return self.coord[(self.client == c) & self.included]


def draw_gradient_canaries(m: int, num_params: int, num_clients: int,
                           seed: int) -> GradientCanaries:
    """``m`` Dirac canaries: distinct coordinates of ``num_params``, a uniformly random
    client each, included with probability 1/2; reproducible by ``seed``."""
    if not 0 < m <= num_params:
        raise ValueError(f"audit.dp.canaries = {m}: gradient canaries need one distinct "
                         f"parameter each; allowed: 1..{num_params} for this model")
    rng = np.random.default_rng([seed, _SEED_TAG])
    coord = rng.choice(num_params, size=m, replace=False).astype(np.int64)
    client = rng.integers(0, num_clients, size=m).astype(np.int64)
    included = np.random.default_rng([seed, _SEED_TAG, 1]).random(m) < 0.5
    return GradientCanaries(coord, client, included)


class CanaryReader:
    """The server's view of the canaries: called with a client's update (its sent model
    minus the global model it received, by state_dict key), returns (canary ids 0..m-1,
    the update at every canary's coordinate) -- all canaries, the client's own and the
    others', so that the audit can compare a coordinate across clients."""

    def __init__(self, canaries: GradientCanaries, layout: ParamLayout) -> None:
        self.canaries, self.layout = canaries, layout
        self._where = layout.locate(canaries.coord)

    def __call__(self, client: int,
                 update: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        values = np.zeros(self.canaries.m, dtype=np.float64)
        for p, flat, pos in self._where:
            values[pos] = np.asarray(update[self.layout.names[p]],
                                     dtype=np.float64).ravel()[flat]
        return np.arange(self.canaries.m, dtype=np.int64), values


def global_scores(canaries: GradientCanaries, layout: ParamLayout,
                  change: Mapping[str, np.ndarray]) -> np.ndarray:
    """Score per canary on the global model: minus the change (w_T - w_0, by state_dict
    key) of its coordinate."""
    return -CanaryReader(canaries, layout)(0, change)[1]


def update_scores(canaries: GradientCanaries,
                  rounds: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """Score per canary on the clients' sent updates (the server's view), summed over
    ``rounds`` -- each (canary ids, client, value) rows an :class:`CanaryReader` gave:

        score_j = - sum_t ( u_{t, c_j}[k_j] - mean_{c != c_j} u_{t, c}[k_j] ),

    its own client's change of its coordinate against the other clients' mean change of
    the same coordinate in the same round.  The real data's gradient at a coordinate
    drifts the same way on every client (the same model, data of the same task) and the
    difference cancels that drift; the other clients never train on canary j, so it
    costs only their noise (variance + 1/(n-1) of one client's).  A round where client c_j
    sent nothing adds 0; one where no other client did, its own change alone."""
    total = np.zeros(canaries.m, dtype=np.float64)
    for ids, client, values in rounds:
        ids, client = np.asarray(ids, np.int64), np.asarray(client, np.int64)
        values = np.asarray(values, np.float64)
        sums = np.zeros(canaries.m)
        counts = np.zeros(canaries.m)
        np.add.at(sums, ids, values)
        np.add.at(counts, ids, 1.0)
        own = (client == canaries.client[ids])
        own_value = np.full(canaries.m, np.nan)
        own_value[ids[own]] = values[own]
        others = counts - ~np.isnan(own_value)
        ok = ~np.isnan(own_value)
        mean_others = np.where(ok & (others > 0),
                               (sums - np.nan_to_num(own_value)) / np.maximum(others, 1), 0.0)
        total[ok] += own_value[ok] - mean_others[ok]
    return -total


def canaries_for_model(m: int, model, num_clients: int,
                       seed: int) -> tuple[GradientCanaries, ParamLayout]:
    """The run's gradient canaries and the layout they index, for ``model`` (the clients,
    the server's probe and the audit draw the same ones from the scenario's seed)."""
    layout = ParamLayout.of(model)
    return draw_gradient_canaries(m, layout.total, num_clients, seed), layout
