"""Scenarios as files: the schema (:mod:`~fedaudit.config.schema`), loading, ``--set``
overrides and validation (:mod:`~fedaudit.config.loading`), the cross-key checks
(:mod:`~fedaudit.config.checks`) and everything ``fedaudit run`` checks before it trains
(:mod:`~fedaudit.config.preflight`).  A validated scenario is a typed
:class:`fedaudit.scenario.Scenario`."""

from fedaudit.config.loading import (PATH_KEYS, bundled_scenarios, find_scenario, from_toml,
                                     load_scenario, parse_override, scenario_from_dict,
                                     validate)
from fedaudit.config.schema import BASE_SCHEMA, DEFAULT_ATTACKS, defaults, schema
from fedaudit.errors import ScenarioError
from fedaudit.scenario import sections_to_toml, to_toml

__all__ = ["BASE_SCHEMA", "DEFAULT_ATTACKS", "PATH_KEYS", "ScenarioError",
           "bundled_scenarios", "defaults", "find_scenario", "from_toml",
           "load_scenario", "parse_override", "scenario_from_dict", "schema",
           "sections_to_toml", "to_toml", "validate"]


def __getattr__(name: str):
    if name == "SCHEMA":  # the former constant
        return schema()
    raise AttributeError(name)
