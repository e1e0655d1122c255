"""The scenario schema: every table and key a scenario may have, with its type, default and
allowed values (:class:`fedaudit.options.Field`).

The fixed part is :data:`BASE_SCHEMA`; :func:`schema` adds what the registries declare:
each attack's ``[attack.<name>]`` options, the ``[defense]`` options of every registered
defense and the tables that registered audit stages declare.  The choices of datasets,
models, quantizers, attacks, attack targets and defenses come from their registries.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

from fedaudit.errors import ScenarioError
from fedaudit.options import Field, option as _f


def _flower_strategies() -> tuple[str, ...]:
    # Strategies that aggregate model arrays with a plain constructor; the DP wrappers are
    # defenses, the XGBoost ones do not train torch models, and FedProx / QFedAvg need a
    # client-side loss term our ClientApp does not implement yet.
    return (
        "FedAvg", "FedAvgM", "FedMedian", "FedTrimmedAvg", "Krum", "MultiKrum", "Bulyan",
        "FedAdagrad", "FedAdam", "FedYogi",
    )


def _registries():
    """The plug-in registries, populated by importing the packages that register the
    built-in entries (torch: imported on first use of the schema, not at ``--version``)."""
    import attacks
    import fedaudit.data
    import fedaudit.models
    import fedaudit.quant

    return (fedaudit.data.DATASETS, fedaudit.models.MODELS, fedaudit.quant.QUANTIZERS,
            attacks.ATTACKS)


def _aggregations():
    """The aggregation paths (:mod:`fedaudit.probes.aggregation`)."""
    from fedaudit.probes.aggregation import AGGREGATIONS

    return AGGREGATIONS


def _defenses():
    import fedaudit.defenses

    return fedaudit.defenses.DEFENSES


def _check_quantizers(names: list[str]) -> str | None:
    quantizers = _registries()[2]
    if not names:
        return "must list at least one quantizer (or set enabled = false)"
    bad = [n for n in names if not quantizers.accepts(n)]
    if bad:
        return f"unknown quantizer {bad[0]!r}; allowed: {quantizers.allowed()}"
    if len(set(names)) != len(names):
        return "lists a quantizer twice"
    return None


#: Flower strategies with server-optimizer state between rounds (not checkpointed, so a
#: run using one cannot be resumed)
STATEFUL_STRATEGIES = ("FedAvgM", "FedAdagrad", "FedAdam", "FedYogi")


def _check_checkpoints(value: str) -> str | None:
    if value == "all" or re.fullmatch(r"last-[1-9][0-9]*", value):
        return None
    return "must be 'all' or 'last-N' with N >= 1"


#: the attacks a scenario runs unless it says otherwise (registered ones can be added)
DEFAULT_ATTACKS = ("resmia", "loss", "confidence", "entropy", "mentropy")
#: ``attack.methods`` when a scenario on text data does not list it (Res-MIA erodes images)
DEFAULT_TEXT_ATTACKS = ("loss", "zlib")


def _check_methods(methods: list[str]) -> str | None:
    return None if methods else "must list at least one attack (or set enabled = false)"


def _targets():
    """The attack target kinds (:mod:`fedaudit.audit.targets`)."""
    import fedaudit.audit.targets

    return fedaudit.audit.targets.TARGETS


def _stages():
    """The audit stages (:mod:`fedaudit.audit.stages`)."""
    import fedaudit.audit.stages

    return fedaudit.audit.stages


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


#: the fixed part of the schema; :func:`schema` adds each attack's ``[attack.<name>]``
BASE_SCHEMA: dict[str, dict[str, Field]] = {
    "scenario": {
        "name": _f(str, "scenario", "run name, used in the run directory name",
                   check=lambda v: None if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", v)
                   else "may only contain letters, digits, '_', '.', '-' and must start "
                        "with a letter or digit"),
        "seed": _f(int, 0, "seed for data splits, partitioning, model init and training",
                   min=0, max=2**31 - 1),
        "description": _f(str, "", "free text shown in the report"),
    },
    "data": {
        "dataset": _f(str, "digits", "dataset name (a registered dataset)",
                      choices=lambda: _registries()[0].names()),
        "data_dir": _f(str, "data", "directory holding torchvision datasets"),
        "download": _f(bool, False, "allow torchvision to download a missing dataset"),
        "path": _f(str, "", "path of the .npz file when dataset = 'npz', folder of class "
                            "subfolders when dataset = 'imagefolder', plain-text play "
                            "(speeches opened by 'NAME:' lines) when dataset = 'shakespeare'"),
        "image_size": _f(int, 0, "imagefolder: resize every image to this many pixels square "
                                 "(bilinear); 0 = keep the files' size", min=0),
        "max_samples": _f(int, 0, "use at most this many samples in total (0 = all); text: "
                          "sequences, taken as whole speeches", min=0),
        "holdout_fraction": _f(float, 0.2, "fraction kept as attack non-members",
                               min=0.0, max=0.9, min_exclusive=True),
        "test_fraction": _f(float, 0.2, "fraction used for accuracy and r_Qn",
                            min=0.0, max=0.9, min_exclusive=True),
        "partitioner": _f(str, "iid", "how train samples are split across clients; text "
                          "data: iid / dirichlet / pathological deal whole speeches (the "
                          "speaker role as the label), speaker gives each client one role",
                          choices=("iid", "dirichlet", "pathological", "speaker")),
        "alpha": _f(float, 0.5, "Dirichlet concentration (smaller = more label skew)",
                    min=0.0, min_exclusive=True),
        "min_partition_size": _f(int, 2, "Dirichlet: smallest allowed client", min=0),
        "classes_per_client": _f(int, 2, "pathological: classes per client (text: speaker "
                                 "roles per client)", min=1),
        "seq_len": _f(int, 80, "text: characters per sequence; a speech is cut into "
                      "non-overlapping windows of seq_len characters, each with the "
                      "next-character targets (the speech's last < seq_len + 1 characters "
                      "are dropped)", min=1, max=4096),
        "min_role_sequences": _f(int, 16, "speaker partitioner: roles with fewer training "
                                 "sequences are dropped (not merged); the "
                                 "federation.num_clients largest of the others are the "
                                 "clients", min=1),
    },
    "federation": {
        "num_clients": _f(int, 10, "number of simulated clients (SuperNodes)", min=1, max=10000),
        "rounds": _f(int, 5, "federated rounds", min=1, max=100000),
        "strategy": _f(str, "FedAvg", "a flwr.serverapp.strategy class",
                       choices=_flower_strategies()),
        "fraction_train": _f(float, 1.0, "fraction of clients sampled each round",
                             min=0.0, max=1.0, min_exclusive=True),
        "min_clients": _f(int, 1, "fewest valid replies a round needs to update the model",
                          min=1),
        "timeout": _f(float, 3600.0, "seconds to wait for client replies each round",
                      min=0.0, min_exclusive=True),
        "aggregation": _f(str, "plain", "how the clients' updates reach the server (a "
                          "registered aggregation path, fedaudit.probes.aggregation): plain "
                          "(every client's reply; Flower's strategies); what the server sees "
                          "decides which probes, attack targets and stages can run",
                          choices=lambda: _aggregations().names()),
    },
    "federation.client_resources": {
        "num_cpus": _f((int, float), 1, "CPUs per client actor (bounds concurrency)",
                       min=0.0, min_exclusive=True),
        "num_gpus": _f((int, float), 0.0, "GPUs per client actor; a fraction shares a GPU",
                       min=0.0),
    },
    "federation.init_args": {
        "address": _f(str, "", "existing Ray cluster to join ('auto' or host:port); "
                      "empty starts a local one"),
        "num_cpus": _f(int, 0, "CPUs Ray may use (0 = all)", min=0),
        "num_gpus": _f(int, -1, "GPUs Ray may use (-1 = detect)", min=-1),
        "object_store_memory": _f(int, 0, "bytes for Ray's object store (0 = Ray's default)",
                                  min=0),
        "logging_level": _f(str, "ERROR", "Ray's log level",
                            choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
        "log_to_driver": _f(bool, False, "show actor output in this terminal"),
    },
    "model": {
        "name": _f(str, "cnn", "model architecture (a registered model)",
                   choices=lambda: _registries()[1].names()),
        "width": _f(int, 16, "cnn: channels of the first conv layer; mlp: hidden units / 8; "
                    "transformer: embedding width", min=1, max=4096),
        "layers": _f(int, 2, "transformer: number of blocks", min=1, max=64),
        "heads": _f(int, 4, "transformer: attention heads (must divide model.width)",
                    min=1, max=256),
    },
    "train": {
        "local_epochs": _f(int, 1, "local epochs per round", min=1),
        "batch_size": _f(int, 32, "local batch size", min=1),
        "optimizer": _f(str, "sgd", "local optimizer", choices=("sgd", "adam")),
        "lr": _f(float, 0.05, "learning rate", min=0.0, min_exclusive=True),
        "momentum": _f(float, 0.9, "SGD momentum", min=0.0, max=1.0),
        "weight_decay": _f(float, 0.0, "L2 weight decay", min=0.0),
        "device": _f(str, "auto", "where clients and server compute",
                     choices=("auto", "cpu", "cuda")),
    },
    "audit.gnq": {
        "client": _f(bool, True, "score every local sample with in-run ghost GNQ"),
        "server": _f(bool, True, "score each client's update against the round's others"),
        "lam": _f(float, 1e-2, "ridge lambda (absolute mode)", min=0.0, min_exclusive=True),
        "lam_mode": _f(str, "absolute", "absolute lambda, or relative: rho * trace(K) / B",
                       choices=("absolute", "relative")),
        "rho": _f(float, 1e-2, "relative lambda factor", min=0.0, min_exclusive=True),
    },
    "audit.quantization": {
        "enabled": _f(bool, True, "post-training quantization and r_Qn"),
        "quantizers": _f(list, ["fp32", "int8", "int4", "int2", "ternary",
                                "ternary-sparse50", "ternary-sparse90", "binary"],
                         "quantizers applied to the global model trajectory",
                         item_types=(str,), check=_check_quantizers),
        "checkpoints": _f(str, "all", "checkpoints forming the candidates: all or last-N",
                          check=_check_checkpoints),
        "seeds": _f(list, [], "extra seeds, each rerunning the federation: r_Qn is "
                    "estimated per run and reported as the median over runs", item_types=(int,)),
        "keep_lowest": _f(int, 10, "r_Qn candidates kept per run: the distinct quantized "
                          "checkpoints of lowest test loss (0 = all)", min=0),
    },
    "audit.dp": {
        "canaries": _f(int, 0, "DP audit with one run (Steinke et al. 2023; Gaussian DP: "
                       "Mahloujifar et al. 2025): number of canaries, each included with "
                       "probability 1/2 (0 = off)", min=0),
        "level": _f(str, "auto", "sample: canary samples (mislabeled holdout samples) in "
                    "the clients' data; gradient (dp-sgd): white-box Dirac gradient "
                    "canaries of norm clip_norm inside the clients' DP-SGD steps; client: "
                    "canary clients sending a fixed direction at the clipping norm; auto: "
                    "the defense's level (none / dp-sgd: sample; dp-client / dp-server / "
                    "clip: client)",
                    choices=("auto", "sample", "gradient", "client")),
        "k_plus": _f(int, -1, "Steinke bound: guess 'included' for the k_plus "
                     "highest-scoring canaries (-1 = canaries // 4; the Gaussian-DP bound "
                     "searches its own counts)", min=-1),
        "k_minus": _f(int, -1, "guess 'excluded' for the k_minus lowest-scoring canaries "
                      "(-1 = canaries // 4)", min=-1),
        "beta": _f(float, 0.05, "the lower bound holds with confidence 1 - beta", min=0.0,
                   max=0.5, min_exclusive=True),
    },
    "attack": {
        "enabled": _f(bool, True, "run the black-box membership attacks"),
        "methods": _f(list, list(DEFAULT_ATTACKS), "attacks to run (registered attacks; text "
                      "data: default loss, zlib)",
                      item_types=(str,), item_choices=lambda: _registries()[3].names(),
                      check=_check_methods),
        "targets": _f(list, ["global", "quantized"], "what the attacks target (registered "
                      "target kinds; the help lists them)",
                      item_types=(str,), item_choices=lambda: _targets().names(),
                      check=_check_targets),
        "rounds": _f((str, list), "last", "rounds attacked by the clients / rounds targets: "
                     "last (each client's last round; the final round), all, or a list",
                     check=_check_rounds),
        "members_per_client": _f(int, 0, "members scored per client (0 = all)", min=0),
        "seed": _f(int, 0, "seed for member/non-member sampling", min=0),
        "batch_size": _f(int, 512, "queries per oracle batch", min=1),
    },
    "attack.reference": {
        "models": _f(int, 4, "reference models for the attacks that use them (lira, rmia): "
                     "federations trained with the target's recipe, each on as many samples "
                     "as the target (at least 2: a Gaussian needs a spread)", min=2, max=1024),
        "mode": _f(str, "offline", "offline: no reference sees an audit sample; online: "
                   "every audit sample is IN for half of the references (needs an even "
                   "number of models)", choices=("offline", "online")),
        "population": _f(int, 0, "holdout samples set aside as RMIA's population z, never "
                         "audited nor trained on (0 = half of the holdout split); the rest is "
                         "the non-member pool", min=0),
        "allow_smaller": _f(bool, False, "train the references on fewer samples than the "
                            "target when the data cannot give more (the run then warns); "
                            "off: such a run refuses before training"),
        "parallel": _f(int, 4, "reference federations trained at once (their clients' "
                       "messages go out together; each batch is cached when it finishes)",
                       min=1),
        "runtime": _f(str, "auto", "where reference clients train: grid (the run's Flower "
                      "grid: the Ray actors of `fedaudit run`, with client_resources), "
                      "driver (in the ServerApp's process, one client after another), auto "
                      "(grid in simulation, driver when deployed: the auditor's models stay "
                      "off the participants' SuperNodes)", choices=("auto", "grid", "driver")),
    },
    "faults": {
        "crash_rate": _f(float, 0.0, "probability that a client's training raises (labs, tests)",
                         min=0.0, max=1.0),
        "nan_rate": _f(float, 0.0, "probability that a client returns non-finite weights",
                       min=0.0, max=1.0),
        "seed": _f(int, 0, "seed of the fault draws", min=0),
    },
    "defense": {
        "kind": _f(str, "none", "privacy defense (a registered defense; docs/algorithms.md "
                   "section 6): none; dp-sgd (local DP-SGD with Opacus on every client); "
                   "dp-server / dp-client (Flower's central-DP wrappers, server- or "
                   "client-side fixed clipping of updates + Gaussian noise on the "
                   "aggregate); clip (server-side update clipping, no noise); the other keys "
                   "of [defense] are the options the defenses declare",
                   choices=lambda: _defenses().names()),
    },
    "canaries": {
        "count": _f(int, 0, "canaries per listed client (0 = none)", min=0),
        "clients": _f(list, [0], "clients that receive canaries", item_types=(int,)),
        "kind": _f(str, "mislabeled", "mislabeled samples or uniform-noise images; secret "
                   "(text data): secret-sharer canaries, count secrets per listed client and "
                   "repeats value", choices=("mislabeled", "noise", "secret")),
        "template": _f(str, "my secret number is ", "secret: the text before each secret "
                       "(the attacker's prefix)"),
        "alphabet": _f(str, "0123456789", "secret: the characters a secret is drawn from "
                       "(any missing from the corpus join the vocabulary)"),
        "secret_length": _f(int, 5, "secret: characters per secret (candidates: "
                            "len(alphabet) ** secret_length)", min=1, max=12),
        "repeats": _f(list, [1, 4, 16], "secret: how many times each client's secrets are "
                      "inserted, one group of count secrets per value", item_types=(int,)),
        "references": _f(int, 20, "secret: never-inserted reference secrets", min=0),
        "beam": _f(int, 1, "secret: beam width of the extraction attack (1 = greedy)", min=1),
    },
}


def _defense_options() -> dict[str, Field]:
    """The union of the options the registered defenses declare (one ``[defense]`` table
    for every kind; a key two defenses share must be declared identically)."""
    out: dict[str, Field] = {}
    # the kind declaring most options first, so the table keeps its familiar key order
    for defense in sorted((_defenses().get(k) for k in _defenses().names()),
                          key=lambda d: -len(d.options)):
        for key, f in defense.options.items():
            if key == "kind" or out.get(key, f) != f:
                raise ScenarioError(f"defense {defense.kind!r}: option {key!r} clashes with another "
                                    "defense's declaration of [defense] " + key)
            out[key] = f
    return out


def schema() -> dict[str, dict[str, Field]]:
    """Every table and key a scenario may have: :data:`BASE_SCHEMA` plus, for each
    registered attack that declares options, the table ``[attack.<name>]``, in
    ``[defense]`` the options the registered defenses declare, and the tables the
    registered audit stages declare (read from the registries
    each time, so a plug-in registered in a notebook is known at once)."""
    attacks = _registries()[3]
    out: dict[str, dict[str, Field]] = {}
    for sec, fields in BASE_SCHEMA.items():
        out[sec] = fields
        if sec == "attack":
            # the target kinds describe themselves; the attacks' own tables follow [attack]
            kinds = "; ".join(f"{k.name}: {k.describe}" for k in _targets().values())
            out[sec] = {**fields, "targets": dataclasses.replace(
                fields["targets"], help=f"what the attacks target (registered kinds): {kinds}")}
            for name in attacks.names():
                opts = attacks.meta(name).get("options") or {}
                if opts:
                    out[f"attack.{name}"] = dict(opts)
        if sec == "defense":
            out[sec] = {**fields, **_defense_options()}
    for stage in _stages().ordered_stages():
        for table, opts in stage.options.items():
            if table in out:
                raise ScenarioError(f"audit stage {stage.name!r}: table [{table}] is "
                                    "already declared")
            out[table] = dict(opts)
    return out




def defaults() -> dict[str, dict[str, Any]]:
    """Every section with every key at its default."""
    return {sec: {k: copy.deepcopy(f.default) for k, f in fields.items()}
            for sec, fields in schema().items()}
