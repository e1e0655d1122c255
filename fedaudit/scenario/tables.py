"""The scenario's tables, one frozen dataclass each: every key declared once, as a field
(:func:`~fedaudit.scenario.declare.key`: its type is the annotation, then its default,
help and constraints).  ``scenario.audit.gnq.lam`` is ``[audit.gnq] lam`` is
``--set audit.gnq.lam=...``.

Choices that plug-ins extend are named lazily (``choices=registered("dataset")``: the
names registered when a value is checked), so declaring them imports no plug-in package.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedaudit.registry import registered, registry_of
from fedaudit.scenario.declare import (PluginKeys, entry_tables, key,
                                       plugin_keys)

__all__ = [
    "AttackConfig", "AuditConfig", "CanariesConfig", "ClientResources", "DataConfig",
    "DefenseConfig", "DpAuditConfig", "FaultsConfig", "FederationConfig", "GnqConfig",
    "ModelConfig", "QuantizationConfig", "RayInit", "ReferenceConfig", "RunInfo",
    "SecAggConfig", "TrainConfig", "MatrixConfig", "DEFAULT_ATTACKS",
    "DEFAULT_TEXT_ATTACKS",
]

#: the attacks a scenario runs unless it says otherwise (registered ones can be added)
DEFAULT_ATTACKS = ("resmia", "loss", "confidence", "entropy", "mentropy")
#: ``attack.methods`` when a scenario on text data does not list it (Res-MIA erodes images)
DEFAULT_TEXT_ATTACKS = ("loss", "zlib")


# ---- checks of single values that a type, range or choice list cannot say ---------------
def _check_name(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", value) else \
        "may only contain letters, digits, '_', '.', '-' and must start with a letter or digit"


def _check_quantizers(names: list[str]) -> str | None:
    quantizers = registry_of("quantizer")
    if not names:
        return "must list at least one quantizer (or set enabled = false)"
    bad = [n for n in names if not quantizers.accepts(n)]
    if bad:
        return f"unknown quantizer {bad[0]!r}; allowed: {quantizers.allowed()}"
    if len(set(names)) != len(names):
        return "lists a quantizer twice"
    return None


def _check_checkpoints(value: str) -> str | None:
    if value == "all" or re.fullmatch(r"last-[1-9][0-9]*", value):
        return None
    return "must be 'all' or 'last-N' with N >= 1"


def _check_methods(methods: list[str]) -> str | None:
    return None if methods else "must list at least one attack (or set enabled = false)"


def _check_targets(targets: list[str]) -> str | None:
    return "lists a target twice" if len(set(targets)) != len(targets) else None


def _check_rounds(value: str | list) -> str | None:
    if isinstance(value, str):
        return None if value in ("last", "all") else "must be 'last', 'all' or a list of rounds"
    if not value or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in value):
        return "a list of rounds must hold round numbers >= 1"
    if len(set(value)) != len(value):
        return "lists a round twice"
    return None


def _check_client_samples(value: int | list) -> str | None:
    caps = value if isinstance(value, (list, tuple)) else [value]
    ok = caps and all(type(c) is int and c >= 0 for c in caps)  # type: bool is not a count
    return None if ok else "must be a number of samples >= 0 (0 = all) or a list of them"


# ---- the tables -----------------------------------------------------------------------
@dataclass(frozen=True)
class RunInfo:
    """``[scenario]``"""
    name: str = key("scenario", "run name, used in the run directory name", check=_check_name)
    seed: int = key(0, "seed for data splits, partitioning, model init and training",
                    min=0, max=2**31 - 1)
    description: str = key("", "free text shown in the report")


@dataclass(frozen=True)
class DataConfig(PluginKeys):
    """``[data]``: the dataset, its split into train / holdout / test, and the partitioner;
    then the options the registered datasets declare (``seq_len``, ``image_size`` ...),
    read as attributes (``cfg.seq_len``)."""
    dataset: str = key("digits", "dataset name (a registered dataset)",
                       choices=registered("dataset"))
    data_dir: str = key("data", "directory holding torchvision datasets")
    download: bool = key(False, "allow torchvision to download a missing dataset")
    path: str = key("", "path of the .npz file when dataset = 'npz', folder of class "
                        "subfolders when dataset = 'imagefolder', plain-text play (speeches "
                        "opened by 'NAME:' lines) when dataset = 'shakespeare'")
    max_samples: int = key(0, "use at most this many samples in total (0 = all); text: "
                           "sequences, taken as whole speeches", min=0)
    holdout_fraction: float = key(0.2, "fraction kept as attack non-members",
                                  min=0.0, max=0.9, min_exclusive=True)
    test_fraction: float = key(0.2, "fraction used for accuracy and r_Qn",
                               min=0.0, max=0.9, min_exclusive=True)
    partitioner: str = key("iid", "how train samples are split across clients; text data: "
                           "iid / dirichlet / pathological deal whole speeches (the speaker "
                           "role as the label), speaker gives each client one role",
                           choices=("iid", "dirichlet", "pathological", "speaker"))
    alpha: float = key(0.5, "Dirichlet concentration (smaller = more label skew)",
                       min=0.0, min_exclusive=True)
    min_partition_size: int = key(2, "Dirichlet: smallest allowed client", min=0)
    classes_per_client: int = key(2, "pathological: classes per client (text: speaker "
                                  "roles per client)", min=1)
    client_samples: int | tuple[int, ...] = key(
        0, "at most this many training samples per client (a seeded random subset of its "
        "partition; the rest trains nobody; 0 = all), or a list of one cap per client",
        check=_check_client_samples)
    #: the datasets' options (``register_dataset(..., options=...)``)
    options: Mapping[str, Any] = plugin_keys("dataset")


@dataclass(frozen=True)
class ClientResources:
    """``[federation.client_resources]``"""
    num_cpus: int | float = key(1, "CPUs per client actor (bounds concurrency)",
                                min=0.0, min_exclusive=True)
    num_gpus: int | float = key(0.0, "GPUs per client actor; a fraction shares a GPU", min=0.0)


@dataclass(frozen=True)
class RayInit:
    """``[federation.init_args]``: how Ray starts (or which cluster it joins)."""
    address: str = key("", "existing Ray cluster to join ('auto' or host:port); empty starts "
                       "a local one")
    num_cpus: int = key(0, "CPUs Ray may use (0 = all)", min=0)
    num_gpus: int = key(-1, "GPUs Ray may use (-1 = detect)", min=-1)
    object_store_memory: int = key(0, "bytes for Ray's object store (0 = Ray's default)", min=0)
    logging_level: str = key("ERROR", "Ray's log level",
                             choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
    log_to_driver: bool = key(False, "show actor output in this terminal")


@dataclass(frozen=True)
class SecAggConfig:
    """``[federation.secagg]``: the options of Flower's SecAgg+ (``SecAggPlusWorkflow``,
    ``secaggplus_mod``), read when ``federation.aggregation = "secagg+"``."""
    num_shares: int = key(3, "shares each client's secrets are split into (its neighbours "
                          "plus itself): odd, >= 3, at most the clients per round", min=3)
    reconstruction_threshold: int = key(2, "shares needed to rebuild a dropped client's "
                                        "mask: >= 2 and below num_shares", min=2)
    clipping_range: float = key(8.0, "each model parameter is clipped to [-r, r] before "
                                "quantisation", min=0.0, min_exclusive=True)
    quantization_range: int = key(4194304, "integers a parameter is quantised to (2^22)",
                                  min=2)
    modulus_range: int = key(4294967296, "modulus of the masks' arithmetic: a power of 2, "
                             "above quantization_range, at most 2^32", min=4)
    max_weight: float = key(1000.0, "largest client weight (num_examples) SecAgg+ encodes "
                            "without overflow", min=0.0, min_exclusive=True)


@dataclass(frozen=True)
class FederationConfig:
    """``[federation]`` with its two sub-tables."""
    num_clients: int = key(10, "number of simulated clients (SuperNodes)", min=1, max=10000)
    rounds: int = key(5, "federated rounds", min=1, max=100000)
    strategy: str = key("FedAvg", "how the server combines the replies (a registered "
                        "aggregator, fedaudit.aggregators, named as Flower's strategy class); "
                        "its options are [federation.<strategy>]",
                        choices=registered("aggregator"))
    fraction_train: float = key(1.0, "fraction of clients sampled each round",
                                min=0.0, max=1.0, min_exclusive=True)
    min_clients: int = key(1, "fewest valid replies a round needs to update the model", min=1)
    timeout: float = key(3600.0, "seconds to wait for client replies each round",
                         min=0.0, min_exclusive=True)
    aggregation: str = key("plain", "how the clients' updates reach the server (a registered "
                           "aggregation path, fedaudit.probes.aggregation): plain (every "
                           "client's reply; Flower's strategies) or secagg+ (Flower's "
                           "SecAgg+: only the sum of the masked models); what the server sees "
                           "decides which probes, attack targets and stages can run",
                           choices=registered("aggregation"))
    client_resources: ClientResources = ClientResources()
    secagg: SecAggConfig = SecAggConfig()
    init_args: RayInit = RayInit()
    #: aggregator name -> its declared options (``[federation.FedTrimmedAvg] beta``)
    options: Mapping[str, Mapping[str, Any]] = entry_tables("aggregator")

    def sampled_clients(self) -> tuple[int, int]:
        """(min_train_nodes, how many clients are sampled each round) -- flwr's
        ``FedAvg.configure_train`` rule for ``num_clients`` SuperNodes."""
        n = self.num_clients
        min_train = max(1, min(n, round(self.fraction_train * n)))
        return min_train, max(int(n * self.fraction_train), min_train)


@dataclass(frozen=True)
class ModelConfig(PluginKeys):
    """``[model]``: the architecture and the options the registered models declare
    (``layers``, ``heads`` of the transformer), read as attributes (``cfg.layers``)."""
    name: str = key("cnn", "model architecture (a registered model)", choices=registered("model"))
    width: int = key(16, "cnn: channels of the first conv layer; mlp: hidden units / 8; "
                     "transformer: embedding width", min=1, max=4096)
    #: the models' options (``register_model(..., options=...)``)
    options: Mapping[str, Any] = plugin_keys("model")


@dataclass(frozen=True)
class TrainConfig:
    """``[train]``: the clients' local training recipe."""
    local_epochs: int = key(1, "local epochs per round", min=1)
    batch_size: int = key(32, "local batch size", min=1)
    optimizer: str = key("sgd", "local optimizer", choices=("sgd", "adam"))
    lr: float = key(0.05, "learning rate", min=0.0, min_exclusive=True)
    momentum: float = key(0.9, "SGD momentum", min=0.0, max=1.0)
    weight_decay: float = key(0.0, "L2 weight decay", min=0.0)
    device: str = key("auto", "where clients and server compute", choices=("auto", "cpu", "cuda"))
    augment: str = key("none", "data augmentation in local training (images; "
                       "fedaudit.training.augment): none, flip, or flip+crop",
                       choices=registered("augmentation"))
    augment_padding: int = key(4, "flip+crop: zero padding on each side before the random "
                               "crop, in pixels (shifts of up to this many)", min=1)


@dataclass(frozen=True)
class GnqConfig:
    """``[audit.gnq]``"""
    client: bool = key(True, "score every local sample with in-run ghost GNQ")
    server: bool = key(True, "score each client's update against the round's others")
    lam: float = key(1e-2, "ridge lambda (absolute mode)", min=0.0, min_exclusive=True)
    lam_mode: str = key("absolute", "absolute lambda, or relative: rho * trace(K) / B",
                        choices=("absolute", "relative"))
    rho: float = key(1e-2, "relative lambda factor", min=0.0, min_exclusive=True)


@dataclass(frozen=True)
class QuantizationConfig:
    """``[audit.quantization]``"""
    enabled: bool = key(True, "post-training quantization and r_Qn")
    quantizers: tuple[str, ...] = key(
        ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90",
         "binary"], "quantizers applied to the global model trajectory", check=_check_quantizers)
    checkpoints: str = key("all", "checkpoints forming the candidates: all or last-N",
                           check=_check_checkpoints)
    seeds: tuple[int, ...] = key([], "extra seeds, each rerunning the federation: r_Qn is "
                                 "estimated per run and reported as the median over runs")
    keep_lowest: int = key(10, "r_Qn candidates kept per run: the distinct quantized "
                           "checkpoints of lowest test loss (0 = all)", min=0)


@dataclass(frozen=True)
class DpAuditConfig:
    """``[audit.dp]``: the one-run DP audit (:mod:`fedaudit.dp_audit`)."""
    canaries: int = key(0, "DP audit with one run (Steinke et al. 2023; Gaussian DP: "
                        "Mahloujifar et al. 2025): number of canaries, each included with "
                        "probability 1/2 (0 = off)", min=0)
    level: str = key("auto", "sample: canary samples (mislabeled holdout samples) in the "
                     "clients' data; gradient (dp-sgd): white-box Dirac gradient canaries of "
                     "norm clip_norm inside the clients' DP-SGD steps; client: canary clients "
                     "sending a fixed direction at the clipping norm; auto: the defense's "
                     "level (none / dp-sgd: sample; dp-client / dp-server / clip: client)",
                     choices=("auto", "sample", "gradient", "client"))
    k_plus: int = key(-1, "Steinke bound: guess 'included' for the k_plus highest-scoring "
                      "canaries (-1 = canaries // 4; the Gaussian-DP bound searches its own "
                      "counts)", min=-1)
    k_minus: int = key(-1, "guess 'excluded' for the k_minus lowest-scoring canaries "
                       "(-1 = canaries // 4)", min=-1)
    beta: float = key(0.05, "the lower bound holds with confidence 1 - beta", min=0.0,
                      max=0.5, min_exclusive=True)

    def guess_counts(self) -> tuple[int, int]:
        """(k_plus, k_minus) with -1 resolved to ``canaries // 4``."""
        auto = self.canaries // 4
        return (auto if self.k_plus < 0 else self.k_plus,
                auto if self.k_minus < 0 else self.k_minus)


@dataclass(frozen=True)
class AuditConfig:
    """``[audit.*]``"""
    gnq: GnqConfig = GnqConfig()
    quantization: QuantizationConfig = QuantizationConfig()
    dp: DpAuditConfig = DpAuditConfig()


@dataclass(frozen=True)
class ReferenceConfig:
    """``[attack.reference]``: the reference models of LiRA and RMIA."""
    models: int = key(4, "reference models for the attacks that use them (lira, rmia): "
                      "federations trained with the target's recipe, each on as many samples "
                      "as the target (at least 2: a Gaussian needs a spread)", min=2, max=1024)
    mode: str = key("offline", "offline: no reference sees an audit sample; online: every "
                    "audit sample is IN for half of the references (needs an even number of "
                    "models)", choices=("offline", "online"))
    population: int = key(0, "holdout samples set aside as RMIA's population z, never "
                          "audited nor trained on (0 = half of the holdout split); the rest "
                          "is the non-member pool", min=0)
    allow_smaller: bool = key(False, "train the references on fewer samples than the target "
                              "when the data cannot give more (the run then warns); off: such "
                              "a run refuses before training")
    parallel: int = key(4, "reference federations trained at once (their clients' messages "
                        "go out together; each batch is cached when it finishes)", min=1)
    runtime: str = key("auto", "where reference clients train: grid (the run's Flower grid: "
                       "the Ray actors of `fedaudit run`, with client_resources), driver (in "
                       "the ServerApp's process, one client after another), auto (grid in "
                       "simulation, driver when deployed: the auditor's models stay off the "
                       "participants' SuperNodes)", choices=("auto", "grid", "driver"))


@dataclass(frozen=True)
class AttackConfig:
    """``[attack]``, ``[attack.reference]`` and each registered attack's
    ``[attack.<name>]`` options table."""
    enabled: bool = key(True, "run the black-box membership attacks")
    methods: tuple[str, ...] = key(list(DEFAULT_ATTACKS), "attacks to run (registered "
                                   "attacks; text data: default loss, zlib)",
                                   item_choices=registered("attack"), check=_check_methods)
    # the help is completed by fedaudit.config.schema with each kind's description
    targets: tuple[str, ...] = key(["global", "quantized"], "what the attacks target "
                                   "(registered target kinds; the help lists them)",
                                   item_choices=registered("attack target"),
                                   check=_check_targets)
    members_per_client: int = key(0, "members scored per client (0 = all)", min=0)
    seed: int = key(0, "seed for member/non-member sampling", min=0)
    batch_size: int = key(512, "queries per oracle batch", min=1)
    rounds: str | tuple[int, ...] = key(
        "last", "rounds attacked by the clients / rounds targets: last (each client's last "
        "round; the final round), all, or a list", check=_check_rounds)
    reference: ReferenceConfig = ReferenceConfig()
    #: attack name -> its declared options (only attacks that declare any)
    options: Mapping[str, Mapping[str, Any]] = entry_tables("attack")


@dataclass(frozen=True)
class FaultsConfig:
    """``[faults]``"""
    crash_rate: float = key(0.0, "probability that a client's training raises (labs, tests)",
                            min=0.0, max=1.0)
    nan_rate: float = key(0.0, "probability that a client returns non-finite weights",
                          min=0.0, max=1.0)
    seed: int = key(0, "seed of the fault draws", min=0)


@dataclass(frozen=True)
class DefenseConfig(PluginKeys):
    """``[defense]``: the kind and the options the registered defenses declare
    (``noise_multiplier``, ``clip_norm``, ``delta`` for the built-in ones)."""
    kind: str = key("none", "privacy defense (a registered defense; docs/algorithms.md "
                    "section 6): none; dp-sgd (local DP-SGD with Opacus on every client); "
                    "dp-server / dp-client (Flower's central-DP wrappers, server- or "
                    "client-side fixed clipping of updates + Gaussian noise on the "
                    "aggregate); clip (server-side update clipping, no noise); the other keys "
                    "of [defense] are the options the defenses declare",
                    choices=registered("defense"))
    options: Mapping[str, Any] = plugin_keys("defense")


@dataclass(frozen=True)
class CanariesConfig:
    """``[canaries]``; the ``secret`` kind's keys (template .. beam) are read only by it
    (:mod:`fedaudit.data.secrets` plants them)."""
    count: int = key(0, "canaries per listed client (0 = none)", min=0)
    clients: tuple[int, ...] = key([0], "clients that receive canaries")
    kind: str = key("mislabeled", "mislabeled samples or uniform-noise images; secret (text "
                    "data): secret-sharer canaries, count secrets per listed client and "
                    "repeats value", choices=("mislabeled", "noise", "secret"))
    template: str = key("my secret number is ", "secret: the text before each secret (the "
                        "attacker's prefix)")
    alphabet: str = key("0123456789", "secret: the characters a secret is drawn from (any "
                        "missing from the corpus join the vocabulary)")
    secret_length: int = key(5, "secret: characters per secret (candidates: len(alphabet) ** "
                             "secret_length)", min=1, max=12)
    repeats: tuple[int, ...] = key([1, 4, 16], "secret: how many times each client's secrets "
                                   "are inserted, one group of count secrets per value")
    references: int = key(20, "secret: never-inserted reference secrets", min=0)
    beam: int = key(1, "secret: beam width of the extraction attack (1 = greedy)", min=1)


def _check_names(names: list[str]) -> str | None:
    return "lists a name twice" if len(set(names)) != len(names) else None


@dataclass(frozen=True)
class MatrixConfig:
    """``[matrix]``: what ``fedaudit matrix`` runs (``fedaudit run`` ignores it); the names
    are checked when the matrix is planned (:mod:`fedaudit.defense_matrix.plan`)."""
    defenses: tuple[str, ...] = key(
        ["none", "dp-sgd", "dp-fedavg", "secagg+", "secagg+dp-fedavg", "sparsify"],
        "the matrix's columns: defense presets (fedaudit.defenses.presets), defense kinds or "
        "aggregation paths", check=_check_names)
    servers: tuple[str, ...] = key(["imprint", "gradient-ascent"], "the malicious servers "
                                   "run beside each defense, one run each (registered "
                                   "malicious server kinds)", check=_check_names)
    families: tuple[str, ...] = key(["label_leakage", "reconstruction"], "the families of "
                                    "attacks on updates switched on wherever the server sees "
                                    "each update", check=_check_names)
