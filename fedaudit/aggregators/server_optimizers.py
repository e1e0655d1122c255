"""Adaptive server optimizers on the mean update (Reddi et al. 2021, "Adaptive Federated
Optimization", ICLR): with ``Delta`` the weighted mean of the updates, ``m <- beta_1 m +
(1 - beta_1) Delta``, a second moment ``v`` (Adagrad: ``v + Delta^2``; Adam: ``beta_2 v +
(1 - beta_2) Delta^2``; Yogi: ``v - (1 - beta_2) Delta^2 sign(v - Delta^2)``), and
``w <- w + eta m / (sqrt(v) + tau)``.  Flower's ``eta_l`` (the clients' step size) is
only printed by Flower, so it is not an option here: ``train.lr`` is the clients' step."""

from __future__ import annotations

from fedaudit.aggregators.base import Aggregator, register_aggregator
from fedaudit.options import option


def _opts(eta: float, *, betas: bool) -> dict:
    out = {"eta": option(float, eta, "the server's step size", min=0.0, min_exclusive=True),
           "tau": option(float, 1e-3, "the adaptivity: added to sqrt(v) in the denominator",
                         min=0.0, min_exclusive=True)}
    if betas:
        out["beta_1"] = option(float, 0.9, "decay of the first moment", min=0.0, max=1.0)
        out["beta_2"] = option(float, 0.99, "decay of the second moment", min=0.0, max=1.0)
    return out


class _ServerOptimizer(Aggregator):
    server_state = True


@register_aggregator
class FedAdagrad(_ServerOptimizer):
    name = "FedAdagrad"
    describe = "Adagrad on the mean update (Reddi et al. 2021)"
    options = _opts(0.1, betas=False)


@register_aggregator
class FedAdam(_ServerOptimizer):
    name = "FedAdam"
    describe = "Adam on the mean update (Reddi et al. 2021)"
    options = _opts(0.1, betas=True)


@register_aggregator
class FedYogi(_ServerOptimizer):
    name = "FedYogi"
    describe = "Yogi on the mean update (Reddi et al. 2021)"
    options = _opts(0.01, betas=True)
