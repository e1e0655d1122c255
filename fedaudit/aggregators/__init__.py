"""Aggregators: one class per ``federation.strategy``, registered in :data:`AGGREGATORS`
(docs/algorithms.md section 19).

Each names the Flower strategy that aggregates, declares the options of it a scenario sets
in ``[federation.<name>]`` and what the rule needs of the round
(:class:`~fedaudit.aggregators.base.Aggregator`).  The built-in rules, by what they read:
``mean`` (FedAvg, FedAvgM), ``server_optimizers`` (FedAdagrad, FedAdam, FedYogi) and
``robust`` (FedMedian, FedTrimmedAvg, Krum, MultiKrum, Bulyan): a new rule is a class in a
new file here, or one registered anywhere (a notebook cell).
"""

from __future__ import annotations

from fedaudit.aggregators.base import (AGGREGATORS, Aggregator, aggregator_of, get_aggregator,
                                       options_of, register_aggregator)
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__, first=("mean", "server_optimizers", "robust"))
AGGREGATORS.mark_builtin()

__all__ = ["AGGREGATORS", "Aggregator", "aggregator_of", "get_aggregator", "options_of",
           "register_aggregator"]
