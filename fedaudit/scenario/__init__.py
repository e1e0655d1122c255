"""Typed scenarios: one frozen dataclass per scenario table, built from the validated TOML.

**One declaration.**  Every key is declared once, as a field of its table's dataclass
(:mod:`fedaudit.scenario.tables`): the annotation is its type, and
:func:`~fedaudit.scenario.declare.key` gives its default, help and constraints.  Everything
else is derived by walking the dataclasses (:mod:`fedaudit.scenario.declare`): the
schema's fixed part and the table list (:func:`~fedaudit.scenario.declare.layout`), the
defaults, :meth:`Scenario.from_sections` and :meth:`Scenario.sections`.  The typed tables
are the declaration, not the schema dicts, because code reads them
(``scenario.audit.gnq.lam``, which is ``--set audit.gnq.lam=...``): a key a module reads
is a field a reader can jump to, with its help beside it, and no second list has to be
kept in step.  :mod:`fedaudit.config` adds what the registries declare and validates;
what it returns is a :class:`Scenario`, and each layer gets only the sub-config it needs
(``train_local(..., scenario.train)``, ``load_dataset(scenario.data)``).

**Keys that plug-ins declare** at registration join the scenario as the dataclasses mark
(:mod:`fedaudit.scenario.declare`): the options of the registered datasets, models and
defenses are the other keys of ``[data]``, ``[model]`` and ``[defense]`` (their union; a
key two entries declare must be declared identically), read as attributes like the
declared keys (``scenario.data.seq_len``, ``scenario.model.layers``) and held in the
table's ``options``; each attack's options are its table ``[attack.<name>]``
(:attr:`AttackConfig.options`); audit stages declare tables of their own
(:attr:`Scenario.stages`).  Their keys are only known once the plug-ins are registered.

``Scenario.sections()`` gives back the validated ``{"dotted.table": {key: value}}`` form
(what scenario.toml holds and what travels to the clients).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tomli_w

from fedaudit.scenario.declare import Table, build, declared_tables, flatten, layout
from fedaudit.scenario.tables import (DEFAULT_ATTACKS, DEFAULT_TEXT_ATTACKS,
                                      AttackConfig, AuditConfig, CanariesConfig,
                                      ClientResources, DataConfig, DefenseConfig,
                                      DpAuditConfig, FaultsConfig, FederationConfig, GnqConfig,
                                      MatrixConfig,
                                      ModelConfig, QuantizationConfig, RayInit,
                                      ReferenceConfig, RunInfo, SecAggConfig, TrainConfig)

__all__ = [
    "AttackConfig", "AuditConfig", "CanariesConfig", "ClientResources", "DataConfig",
    "DefenseConfig", "DpAuditConfig", "FaultsConfig", "FederationConfig", "GnqConfig",
    "MatrixConfig", "ModelConfig", "QuantizationConfig", "RayInit", "ReferenceConfig",
    "RunInfo", "Scenario", "SecAggConfig", "TrainConfig", "TABLES", "DEFAULT_ATTACKS",
    "DEFAULT_TEXT_ATTACKS",
    "sections_to_toml", "to_toml",
]


@dataclass(frozen=True)
class Scenario:
    """A validated scenario (see :mod:`fedaudit.config` for how one is loaded)."""
    scenario: RunInfo
    data: DataConfig
    federation: FederationConfig
    model: ModelConfig
    train: TrainConfig
    audit: AuditConfig
    attack: AttackConfig
    faults: FaultsConfig
    defense: DefenseConfig
    canaries: CanariesConfig
    matrix: MatrixConfig
    #: the tables registered audit stages and servers declare (``[imprint]`` is the
    #: malicious server's): dotted table -> its values
    stages: Mapping[str, Mapping[str, Any]] = declared_tables("audit stage")

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @classmethod
    def from_sections(cls, s: Mapping[str, Mapping[str, Any]]) -> "Scenario":
        """Build from validated sections (:func:`fedaudit.config.validate` calls this)."""
        return build(cls, s)

    def sections(self) -> dict[str, dict[str, Any]]:
        """The ``{"dotted.table": {key: value}}`` form (fresh dicts and lists)."""
        return flatten(self)

    def replace(self, **overrides: Any) -> "Scenario":
        """A copy with whole sub-configs replaced (``s.replace(train=...)``)."""
        return dataclasses.replace(self, **overrides)

    def __reduce__(self) -> tuple:
        # its tables are read-only mappings, which do not pickle; it travels as its sections
        # (to the run's Ray actors, e.g. inside an update-attack job)
        return Scenario.from_sections, (self.sections(),)


#: dotted table -> the dataclass declaring its keys (the tables of plug-ins aside)
TABLES: dict[str, type] = {t.path: t.cls for t in layout(Scenario) if isinstance(t, Table)}


def to_toml(scenario: Scenario) -> str:
    """Serialise a resolved scenario as nested TOML tables (round-trips through load)."""
    return sections_to_toml(scenario.sections())


def sections_to_toml(sections: dict[str, dict[str, Any]]) -> str:
    """``{"dotted.table": {key: value}}`` as nested TOML tables (also for the scenario
    recorded in an older run's results.json, which may lack newer keys)."""
    nested: dict[str, Any] = {}
    for sec, values in sections.items():
        node = nested
        for part in sec.split("."):
            node = node.setdefault(part, {})
        node.update(values)
    return tomli_w.dumps(nested)
