"""Typed scenarios: one frozen dataclass per scenario table, built from the validated TOML.

:mod:`fedaudit.config` declares every key (type, default, allowed values) and validates a
scenario file; what it returns is a :class:`Scenario`, and each layer gets only the
sub-config it needs (``train_local(..., scenario.train)``, ``load_dataset(scenario.data)``).
The field names here are the schema's keys (a test holds them equal), so
``scenario.audit.gnq.lam`` is ``--set audit.gnq.lam=...``.

Tables whose keys are declared by plug-ins -- each attack's ``[attack.<name>]`` options,
the ``[defense]`` options each defense declares and the tables of audit stages -- are
read-only mappings (:attr:`AttackConfig.options`, :attr:`DefenseConfig.options`,
:attr:`Scenario.stages`), since their keys are only known once the plug-ins are
registered.

``Scenario.sections()`` gives back the validated ``{"dotted.table": {key: value}}`` form
(what scenario.toml holds and what travels to the clients).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import tomli_w

__all__ = [
    "AttackConfig", "CanariesConfig", "ClientResources", "DataConfig", "DefenseConfig",
    "DpAuditConfig",
    "FaultsConfig", "FederationConfig", "GnqConfig", "ModelConfig", "QuantizationConfig",
    "RayInit", "ReferenceConfig", "RunInfo", "Scenario", "TrainConfig", "TABLES",
    "sections_to_toml", "to_toml",
]


@dataclass(frozen=True)
class RunInfo:
    """``[scenario]``"""
    name: str
    seed: int
    description: str


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: the dataset, its split into train / holdout / test, and the partitioner."""
    dataset: str
    data_dir: str
    download: bool
    path: str
    image_size: int
    max_samples: int
    holdout_fraction: float
    test_fraction: float
    partitioner: str
    alpha: float
    min_partition_size: int
    classes_per_client: int
    seq_len: int
    min_role_sequences: int


@dataclass(frozen=True)
class ClientResources:
    """``[federation.client_resources]``"""
    num_cpus: float
    num_gpus: float


@dataclass(frozen=True)
class RayInit:
    """``[federation.init_args]``: how Ray starts (or which cluster it joins)."""
    address: str
    num_cpus: int
    num_gpus: int
    object_store_memory: int
    logging_level: str
    log_to_driver: bool


@dataclass(frozen=True)
class FederationConfig:
    """``[federation]`` with its two sub-tables."""
    num_clients: int
    rounds: int
    strategy: str
    fraction_train: float
    min_clients: int
    timeout: float
    aggregation: str
    client_resources: ClientResources
    init_args: RayInit

    def sampled_clients(self) -> tuple[int, int]:
        """(min_train_nodes, how many clients are sampled each round) -- flwr's
        ``FedAvg.configure_train`` rule for ``num_clients`` SuperNodes."""
        n = self.num_clients
        min_train = max(1, min(n, round(self.fraction_train * n)))
        return min_train, max(int(n * self.fraction_train), min_train)


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``"""
    name: str
    width: int
    layers: int
    heads: int


@dataclass(frozen=True)
class TrainConfig:
    """``[train]``: the clients' local training recipe."""
    local_epochs: int
    batch_size: int
    optimizer: str
    lr: float
    momentum: float
    weight_decay: float
    device: str


@dataclass(frozen=True)
class GnqConfig:
    """``[audit.gnq]``"""
    client: bool
    server: bool
    lam: float
    lam_mode: str
    rho: float


@dataclass(frozen=True)
class QuantizationConfig:
    """``[audit.quantization]``"""
    enabled: bool
    quantizers: tuple[str, ...]
    checkpoints: str
    seeds: tuple[int, ...]
    keep_lowest: int


@dataclass(frozen=True)
class DpAuditConfig:
    """``[audit.dp]``: the one-run DP audit (:mod:`fedaudit.dp_audit`)."""
    canaries: int
    level: str
    k_plus: int
    k_minus: int
    beta: float

    def guess_counts(self) -> tuple[int, int]:
        """(k_plus, k_minus) with -1 resolved to ``canaries // 4``."""
        auto = self.canaries // 4
        return (auto if self.k_plus < 0 else self.k_plus,
                auto if self.k_minus < 0 else self.k_minus)


@dataclass(frozen=True)
class AuditConfig:
    """``[audit.*]``"""
    gnq: GnqConfig
    quantization: QuantizationConfig
    dp: DpAuditConfig


@dataclass(frozen=True)
class ReferenceConfig:
    """``[attack.reference]``: the reference models of LiRA and RMIA."""
    models: int
    mode: str
    population: int
    allow_smaller: bool
    parallel: int
    runtime: str


@dataclass(frozen=True)
class AttackConfig:
    """``[attack]`` plus each registered attack's ``[attack.<name>]`` options table."""
    enabled: bool
    methods: tuple[str, ...]
    targets: tuple[str, ...]
    members_per_client: int
    seed: int
    batch_size: int
    rounds: str | tuple[int, ...]
    reference: ReferenceConfig
    #: attack name -> its declared options (only attacks that declare any)
    options: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class FaultsConfig:
    """``[faults]``"""
    crash_rate: float
    nan_rate: float
    seed: int


@dataclass(frozen=True)
class DefenseConfig:
    """``[defense]``: the kind and the options the registered defenses declare
    (``noise_multiplier``, ``clip_norm``, ``delta`` for the built-in ones)."""
    kind: str
    options: Mapping[str, Any]


@dataclass(frozen=True)
class CanariesConfig:
    """``[canaries]``; the ``secret`` kind's keys (template .. beam) are read only by it
    (:mod:`fedaudit.secrets.planting`)."""
    count: int
    clients: tuple[int, ...]
    kind: str
    template: str
    alphabet: str
    secret_length: int
    repeats: tuple[int, ...]
    references: int
    beam: int


#: dotted table -> the dataclass holding its keys (tables with plug-in keys excluded)
TABLES: dict[str, type] = {
    "scenario": RunInfo, "data": DataConfig, "federation": FederationConfig,
    "federation.client_resources": ClientResources, "federation.init_args": RayInit,
    "model": ModelConfig, "train": TrainConfig, "audit.gnq": GnqConfig,
    "audit.quantization": QuantizationConfig, "audit.dp": DpAuditConfig,
    "attack": AttackConfig,
    "attack.reference": ReferenceConfig,
    "faults": FaultsConfig, "defense": DefenseConfig, "canaries": CanariesConfig,
}


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _table(cls: type, values: Mapping[str, Any], **nested: Any) -> Any:
    return cls(**{k: _frozen(v) for k, v in values.items()}, **nested)


def _thawed(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


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
    #: the tables registered audit stages declare: dotted table -> its values
    stages: Mapping[str, Mapping[str, Any]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @classmethod
    def from_sections(cls, s: Mapping[str, Mapping[str, Any]]) -> "Scenario":
        """Build from validated sections (:func:`fedaudit.config.validate` calls this)."""
        attack_opts = {sec.split(".", 1)[1]: MappingProxyType(dict(v))
                       for sec, v in s.items()
                       if sec.startswith("attack.") and sec not in TABLES}
        defense = dict(s["defense"])
        stages = {sec: MappingProxyType(dict(v)) for sec, v in s.items()
                  if sec not in TABLES and not sec.startswith("attack.")}
        return cls(
            scenario=_table(RunInfo, s["scenario"]),
            data=_table(DataConfig, s["data"]),
            federation=_table(FederationConfig, s["federation"],
                              client_resources=_table(ClientResources,
                                                      s["federation.client_resources"]),
                              init_args=_table(RayInit, s["federation.init_args"])),
            model=_table(ModelConfig, s["model"]),
            train=_table(TrainConfig, s["train"]),
            audit=AuditConfig(gnq=_table(GnqConfig, s["audit.gnq"]),
                              quantization=_table(QuantizationConfig, s["audit.quantization"]),
                              dp=_table(DpAuditConfig, s["audit.dp"])),
            attack=_table(AttackConfig, s["attack"], options=MappingProxyType(attack_opts),
                          reference=_table(ReferenceConfig, s["attack.reference"])),
            faults=_table(FaultsConfig, s["faults"]),
            defense=DefenseConfig(kind=defense.pop("kind"),
                                  options=MappingProxyType(defense)),
            canaries=_table(CanariesConfig, s["canaries"]),
            stages=MappingProxyType(stages),
        )

    def sections(self) -> dict[str, dict[str, Any]]:
        """The ``{"dotted.table": {key: value}}`` form (fresh dicts and lists)."""
        def flat(obj: Any) -> dict[str, Any]:
            return {f.name: _thawed(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                    if not dataclasses.is_dataclass(getattr(obj, f.name))
                    and f.name != "options"}

        fed = self.federation
        out = {
            "scenario": flat(self.scenario), "data": flat(self.data),
            "federation": flat(fed),
            "federation.client_resources": flat(fed.client_resources),
            "federation.init_args": flat(fed.init_args),
            "model": flat(self.model), "train": flat(self.train),
            "audit.gnq": flat(self.audit.gnq), "audit.quantization": flat(self.audit.quantization),
            "audit.dp": flat(self.audit.dp),
            "attack": flat(self.attack), "attack.reference": flat(self.attack.reference),
        }
        out.update({f"attack.{name}": {k: _thawed(v) for k, v in opts.items()}
                    for name, opts in self.attack.options.items()})
        out["faults"] = flat(self.faults)
        out["defense"] = {"kind": self.defense.kind,
                          **{k: _thawed(v) for k, v in self.defense.options.items()}}
        out["canaries"] = flat(self.canaries)
        out.update({sec: {k: _thawed(v) for k, v in values.items()}
                    for sec, values in self.stages.items()})
        return out

    def replace(self, **overrides: Any) -> "Scenario":
        """A copy with whole sub-configs replaced (``s.replace(train=...)``)."""
        return dataclasses.replace(self, **overrides)


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
