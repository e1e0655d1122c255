"""The model the server sends the clients: the scenario's ``[model]``, behind the malicious
server's imprint block when ``[imprint] enabled`` (Fowl et al. 2022,
:mod:`attacks.imprint`; the stage that reads it back is
:mod:`fedaudit.audit.stages.imprint`).  Every place that builds the run's model -- the
clients, the server's recorder, the reference federations, the audit -- builds it here, so
the architectures and state-dict keys agree."""

from __future__ import annotations

from torch import nn

from fedaudit.models.registry import model_for
from fedaudit.scenario import Scenario

__all__ = ["imprint_table", "served_model"]


def imprint_table(scenario: Scenario) -> dict | None:
    """The scenario's ``[imprint]`` table when the block is on, else None."""
    table = scenario.stages.get("imprint")
    return dict(table) if table and table.get("enabled") else None


def served_model(scenario: Scenario, data, *, seed: int) -> nn.Module:
    """:func:`fedaudit.models.model_for` of ``[model]``, initialised from ``seed``; with
    ``[imprint] enabled`` the imprint block in front of it, its thresholds at the Gaussian
    quantiles of the mean pixel over the test split (data the server holds itself)."""
    model = model_for(scenario.model, data, seed=seed)
    table = imprint_table(scenario)
    if table is None:
        return model
    from attacks.imprint import imprint_block_for, imprinted

    return imprinted(model, imprint_block_for(data.x[data.test], table["bins"], table["gain"]))
