"""The mean of the clients' models: FedAvg (McMahan et al. 2017, "Communication-Efficient
Learning of Deep Networks from Decentralized Data", AISTATS), and FedAvgM (Hsu et al.
2019, "Measuring the Effects of Non-Identical Data Distribution for Federated Visual
Classification"): the weighted mean taken as a server step with momentum,
``m <- momentum * m + (w - mean)``, ``w <- w - lr * m``."""

from __future__ import annotations

from fedaudit.aggregators.base import Aggregator, register_aggregator
from fedaudit.options import option


@register_aggregator
class FedAvg(Aggregator):
    name = "FedAvg"
    describe = "the mean of the clients' models weighted by their sample counts"
    weighted_mean = True


@register_aggregator
class FedAvgM(Aggregator):
    name = "FedAvgM"
    describe = "FedAvg's mean as a server SGD step with momentum (Hsu et al. 2019)"
    server_state = True
    options = {
        "server_learning_rate": option(float, 1.0, "the server's step size on the "
                                       "mean update", min=0.0, min_exclusive=True),
        "server_momentum": option(float, 0.0, "the server's momentum (0 = FedAvg "
                                  "with a step size)", min=0.0, max=1.0),
    }
