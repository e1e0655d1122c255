"""The scenario schema: every table and key a scenario may have, with its type, default and
allowed values (:class:`fedaudit.options.Field`).

Each key is declared once, as a field of its table's dataclass in
:mod:`fedaudit.scenario.tables`; :data:`BASE_SCHEMA` is what those declare, read off the
dataclasses (:func:`fedaudit.scenario.declare.layout`).  :func:`schema` adds what the
registries declare, where the dataclasses leave room for it: in ``[data]``, ``[model]``
and ``[defense]`` the options of the registered datasets, models and defenses (their
union), each attack's ``[attack.<name>]`` and each aggregator's ``[federation.<name>]``
options, and the tables that registered audit stages and servers declare.  The choices of datasets,
models, quantizers, attacks, attack targets, defenses and aggregators come from their
registries (:func:`registries`, by name).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from fedaudit.errors import ScenarioError
from fedaudit.options import Field
from fedaudit.registry import Registry
from fedaudit.scenario import DEFAULT_ATTACKS, DEFAULT_TEXT_ATTACKS, Scenario
from fedaudit.scenario.declare import Table, layout

__all__ = ["BASE_SCHEMA", "DEFAULT_ATTACKS", "DEFAULT_TEXT_ATTACKS", "Registries",
           "declared_options", "defaults", "registries", "schema"]


@dataclasses.dataclass(frozen=True)
class Registries:
    """The plug-in registries, by name (:func:`registries`)."""
    datasets: Registry
    models: Registry
    quantizers: Registry
    attacks: Registry
    defenses: Registry
    targets: Registry
    stages: Registry
    probes: Registry
    aggregations: Registry
    aggregators: Registry
    servers: Registry

    def of_kind(self, kind: str) -> Registry:
        """The registry whose entries are ``kind`` (its :attr:`Registry.kind`)."""
        found = [r for r in vars(self).values() if r.kind == kind]
        if not found:
            raise LookupError(f"no registry of {kind!r} entries")
        return found[0]

    def ordered_stages(self) -> list[Any]:
        """The audit stages in run order (:func:`fedaudit.audit.stages.ordered_stages`)."""
        from fedaudit.audit.stages import ordered_stages

        return ordered_stages()


def registries() -> Registries:
    """The plug-in registries, populated by importing the packages that register the
    built-in entries (torch: imported on first use of the schema, not at ``--version``)."""
    import attacks
    import fedaudit.aggregators
    import fedaudit.audit.stages
    import fedaudit.audit.targets
    import fedaudit.data
    import fedaudit.defenses
    import fedaudit.models
    import fedaudit.probes
    import fedaudit.probes.aggregation
    import fedaudit.quant
    import fedaudit.servers
    import fedaudit.training.augment  # noqa: F401  (train.augment's choices)

    return Registries(datasets=fedaudit.data.DATASETS, models=fedaudit.models.MODELS,
                      quantizers=fedaudit.quant.QUANTIZERS, attacks=attacks.ATTACKS,
                      defenses=fedaudit.defenses.DEFENSES,
                      targets=fedaudit.audit.targets.TARGETS, stages=fedaudit.audit.stages.STAGES,
                      probes=fedaudit.probes.PROBES,
                      aggregations=fedaudit.probes.aggregation.AGGREGATIONS,
                      aggregators=fedaudit.aggregators.AGGREGATORS,
                      servers=fedaudit.servers.SERVERS)


def declared_options(registry: Registry, name: str) -> Mapping[str, Field]:
    """The options entry ``name`` declares: given at registration
    (``register_model(..., options={...})``) or, for a registered instance such as a
    defense, its ``options`` attribute."""
    return registry.meta(name).get("options") or getattr(registry.get(name), "options", {})


#: the fixed part of the schema: the keys the dataclasses of fedaudit.scenario declare
BASE_SCHEMA: dict[str, dict[str, Field]] = {
    t.path: dict(t.keys) for t in layout(Scenario) if isinstance(t, Table)}


def _plugin_keys(table: Table, registry: Registry) -> dict[str, Field]:
    """The union of the options the registered entries declare, in registration order (one
    table for every entry: a key two entries declare must be declared identically)."""
    out: dict[str, Field] = {}
    for name in registry:
        for key, f in declared_options(registry, name).items():
            if key in table.keys:
                raise ScenarioError(f"{registry.kind} {name!r}: option {key!r} clashes with "
                                    f"the declared key [{table.path}] {key}")
            if out.get(key, f) != f:
                raise ScenarioError(f"{registry.kind} {name!r}: option {key!r} clashes with "
                                    f"another {registry.kind}'s declaration of "
                                    f"[{table.path}] {key}")
            out[key] = f
    return out


def _with_target_kinds(fields: dict[str, Field], targets: Registry) -> dict[str, Field]:
    """``[attack]`` with the target kinds' descriptions in ``targets``' help."""
    kinds = "; ".join(f"{k.name}: {k.describe}" for k in targets.values())
    return {**fields, "targets": dataclasses.replace(
        fields["targets"], help=f"what the attacks target (registered kinds): {kinds}")}


def schema() -> dict[str, dict[str, Field]]:
    """Every table and key a scenario may have: :data:`BASE_SCHEMA` completed from the
    registries (read each time, so a plug-in registered in a notebook is known at once):
    the options of the registered datasets, models and defenses in ``[data]``,
    ``[model]``, ``[defense]``, each attack's options as ``[attack.<name>]``, each
    aggregator's as ``[federation.<name>]``, and the tables that the registered audit
    stages and servers declare."""
    regs = registries()
    out: dict[str, dict[str, Field]] = {}
    for part in layout(Scenario):
        if isinstance(part, Table):
            fields = dict(part.keys)
            if part.plugin_keys:
                fields.update(_plugin_keys(part, regs.of_kind(part.plugin_keys)))
            if part.path == "attack":
                fields = _with_target_kinds(fields, regs.targets)
            out[part.path] = fields
        elif part.prefix is not None:  # [attack.<name>]: one table per entry with options
            registry = regs.of_kind(part.kind)
            for name in registry.names():
                if opts := declared_options(registry, name):
                    out[f"{part.prefix}.{name}"] = dict(opts)
        else:  # the tables that the audit stages (in run order) and the servers declare
            owners = [*((f"audit stage {s.name!r}", s) for s in regs.ordered_stages()),
                      *((f"server {s.kind!r}", s) for s in regs.servers.values())]
            for owner, entry in owners:
                for table, opts in entry.options.items():
                    if table in out:
                        raise ScenarioError(f"{owner}: table [{table}] is already declared")
                    out[table] = dict(opts)
    return out


def defaults() -> dict[str, dict[str, Any]]:
    """Every section with every key at its default."""
    return {sec: {k: copy.deepcopy(f.default) for k, f in fields.items()}
            for sec, fields in schema().items()}
