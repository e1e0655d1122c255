"""Scenario files: schema, loading, ``--set`` overrides and validation.

A scenario is a TOML file of tables (``[scenario]``, ``[data]``, ``[federation]`` ...).
Every key is declared once in :func:`schema` with its type, default and allowed values
(the choices of datasets, models, quantizers and attacks, and each attack's options, come
from the plug-in registries);
anything else is an error.  Errors are :class:`ScenarioError` with a one-line message that
names the file, the key and what is allowed -- the CLI prints it and exits with code 2.

Table names are dotted paths (``audit.gnq``, ``federation.client_resources``), exactly as
they are written in TOML headers, so ``--set audit.gnq.lam=0.1`` and
``--set federation.client_resources.num_cpus=2`` address them directly.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w


from fedaudit.errors import ScenarioError
from fedaudit.options import Field, check_value as _check_value, option as _f
from fedaudit.scenario import Scenario


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


def _check_methods(methods: list[str]) -> str | None:
    return None if methods else "must list at least one attack (or set enabled = false)"


#: what the attacks target: the final global model (the outsider), each quantized
#: release, each client's local model as the server received it (the curious server), the
#: global model after each round (an insider who sees the trajectory)
TARGETS = ("global", "quantized", "clients", "rounds")


def _check_targets(targets: list[str]) -> str | None:
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        return f"unknown target {bad[0]!r}; allowed: {', '.join(TARGETS)}"
    if len(set(targets)) != len(targets):
        return "lists a target twice"
    return None


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
                            "subfolders when dataset = 'imagefolder'"),
        "image_size": _f(int, 0, "imagefolder: resize every image to this many pixels square "
                                 "(bilinear); 0 = keep the files' size", min=0),
        "max_samples": _f(int, 0, "use at most this many samples in total (0 = all)", min=0),
        "holdout_fraction": _f(float, 0.2, "fraction kept as attack non-members",
                               min=0.0, max=0.9, min_exclusive=True),
        "test_fraction": _f(float, 0.2, "fraction used for accuracy and r_Qn",
                            min=0.0, max=0.9, min_exclusive=True),
        "partitioner": _f(str, "iid", "how train samples are split across clients",
                          choices=("iid", "dirichlet", "pathological")),
        "alpha": _f(float, 0.5, "Dirichlet concentration (smaller = more label skew)",
                    min=0.0, min_exclusive=True),
        "min_partition_size": _f(int, 2, "Dirichlet: smallest allowed client", min=0),
        "classes_per_client": _f(int, 2, "pathological: classes per client", min=1),
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
        "width": _f(int, 16, "cnn: channels of the first conv layer; mlp: hidden units / 8",
                    min=1, max=4096),
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
        "canaries": _f(int, 0, "DP audit with one run (Steinke et al. 2023): number of "
                       "canaries, each included with probability 1/2 (0 = off)", min=0),
        "level": _f(str, "auto", "sample: canary samples (mislabeled holdout samples) in "
                    "the clients' data; client: canary clients sending a fixed direction "
                    "at the clipping norm; auto: the defense's level (none / dp-sgd: sample; "
                    "dp-client / dp-server / clip: client)",
                    choices=("auto", "sample", "client")),
        "k_plus": _f(int, -1, "guess 'included' for the k_plus highest-scoring canaries "
                     "(-1 = canaries // 4)", min=-1),
        "k_minus": _f(int, -1, "guess 'excluded' for the k_minus lowest-scoring canaries "
                      "(-1 = canaries // 4)", min=-1),
        "beta": _f(float, 0.05, "the lower bound holds with confidence 1 - beta", min=0.0,
                   max=0.5, min_exclusive=True),
    },
    "attack": {
        "enabled": _f(bool, True, "run the black-box membership attacks"),
        "methods": _f(list, list(DEFAULT_ATTACKS), "attacks to run (registered attacks)",
                      item_types=(str,), item_choices=lambda: _registries()[3].names(),
                      check=_check_methods),
        "targets": _f(list, ["global", "quantized"], "global (the final model), quantized "
                      "(each quantized release), clients (each client's model as the server "
                      "received it), rounds (the global model after each round)",
                      item_types=(str,), check=_check_targets),
        "rounds": _f((str, list), "last", "rounds attacked by the clients / rounds targets: "
                     "last (each client's last round; the final round), all, or a list",
                     check=_check_rounds),
        "members_per_client": _f(int, 0, "members scored per client (0 = all)", min=0),
        "seed": _f(int, 0, "seed for member/non-member sampling", min=0),
        "batch_size": _f(int, 512, "queries per oracle batch", min=1),
    },
    "attack.reference": {
        "models": _f(int, 4, "reference models for the attacks that use them (lira, rmia): "
                     "federations trained with the target's recipe on the reference split "
                     "(at least 2: a Gaussian needs a spread)", min=2, max=1024),
        "mode": _f(str, "offline", "offline: no reference sees an audit sample; online: "
                   "every audit sample is IN for half of the references (needs an even "
                   "number of models)", choices=("offline", "online")),
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
        "kind": _f(str, "mislabeled", "mislabeled samples or uniform-noise images",
                   choices=("mislabeled", "noise")),
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
    registered attack that declares options, the table ``[attack.<name>]``, and in
    ``[defense]`` the options the registered defenses declare (read from the registries
    each time, so a plug-in registered in a notebook is known at once)."""
    attacks = _registries()[3]
    out: dict[str, dict[str, Field]] = {}
    for sec, fields in BASE_SCHEMA.items():
        out[sec] = fields
        if sec == "attack":  # the attacks' own tables follow [attack]
            for name in attacks.names():
                opts = attacks.meta(name).get("options") or {}
                if opts:
                    out[f"attack.{name}"] = dict(opts)
        if sec == "defense":
            out[sec] = {**fields, **_defense_options()}
    return out


def __getattr__(name: str) -> Any:
    if name == "SCHEMA":  # the former constant
        return schema()
    raise AttributeError(name)


def defaults() -> dict[str, dict[str, Any]]:
    """Every section with every key at its default."""
    return {sec: {k: copy.deepcopy(f.default) for k, f in fields.items()}
            for sec, fields in schema().items()}


def _flatten_sections(raw: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Map nested TOML tables to {dotted section: {key: value}}; reject unknown names."""
    out: dict[str, dict[str, Any]] = {}
    SCHEMA = schema()

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for key, value in table.items():
            path = f"{prefix}.{key}" if prefix else key
            if path in SCHEMA:
                if not isinstance(value, dict):
                    raise ScenarioError(f"{source}: [{path}] must be a table")
                out.setdefault(path, {})
                walk(path, value)
            elif prefix in SCHEMA:
                out[prefix][key] = value
            elif any(s.startswith(path + ".") for s in SCHEMA) and isinstance(value, dict):
                walk(path, value)
            else:
                if prefix:
                    allowed = ", ".join(SCHEMA[prefix]) if prefix in SCHEMA else ""
                    raise ScenarioError(f"{source}: unknown key {path!r}"
                                        + (f"; allowed in [{prefix}]: {allowed}" if allowed else ""))
                raise ScenarioError(f"{source}: unknown table [{path}]; allowed: "
                                    + ", ".join(SCHEMA))
    walk("", raw)
    return out


def validate(sections: dict[str, dict[str, Any]], source: str = "scenario",
             origins: dict[tuple[str, str], str] | None = None) -> Scenario:
    """Return the resolved scenario (defaults filled in) or raise :class:`ScenarioError`.
    ``origins`` names where a key's value came from when not from ``source`` (e.g. the
    ``--set`` argument), so an error blames the right place."""
    resolved = defaults()
    origins = origins or {}
    SCHEMA = schema()
    for sec, values in sections.items():
        fields = SCHEMA[sec]
        for key, value in values.items():
            where = origins.get((sec, key), source)
            if key not in fields:
                raise ScenarioError(f"{where}: unknown key '{sec}.{key}'; allowed in "
                                    f"[{sec}]: " + ", ".join(fields))
            resolved[sec][key] = _check_value(f"{where}: {sec}.{key}", fields[key], value)
    dp = resolved["audit.dp"]
    if dp["level"] == "auto":  # resolved, so the clients rebuild the same data
        dp["level"] = _defenses().get(resolved["defense"]["kind"]).dp_audit or "auto"
    scenario = Scenario.from_sections(resolved)
    _check_cross(scenario, source)
    return scenario


def _check_cross(s: Scenario, source: str) -> None:
    """Constraints that involve several keys."""
    d, fed = s.data, s.federation
    if d.holdout_fraction + d.test_fraction >= 0.95:
        raise ScenarioError(f"{source}: data.holdout_fraction + data.test_fraction = "
                            f"{d.holdout_fraction + d.test_fraction:g}: must be < 0.95 "
                            "so clients keep training data")
    if _registries()[0].meta(d.dataset).get("needs_path") and not d.path:
        raise ScenarioError(f"{source}: data.path is required when data.dataset = "
                            f"{d.dataset!r}")
    if fed.min_clients > fed.num_clients:
        raise ScenarioError(f"{source}: federation.min_clients = {fed.min_clients}: must be "
                            f"<= federation.num_clients ({fed.num_clients})")
    bad = [c for c in s.canaries.clients if not 0 <= c < fed.num_clients]
    if s.canaries.count and bad:
        raise ScenarioError(f"{source}: canaries.clients = {list(s.canaries.clients)!r}: "
                            f"client {bad[0]} does not exist; allowed: "
                            f"0..{fed.num_clients - 1}")
    _check_dp_audit(s, source)
    problem = _defenses().get(s.defense.kind).check(s)
    if problem:
        raise ScenarioError(f"{source}: {problem}")
    _check_references(s, source)
    _check_attack_targets(s, source)
    rounds = s.attack.rounds
    if not isinstance(rounds, str) and max(rounds) > fed.rounds:
        raise ScenarioError(f"{source}: attack.rounds = {list(rounds)!r}: round {max(rounds)} "
                            f"does not exist; allowed: 1..{fed.rounds}")
    if s.train.device == "cuda" and fed.client_resources.num_gpus == 0:
        raise ScenarioError(f"{source}: train.device = 'cuda' needs "
                            "federation.client_resources.num_gpus > 0")


def _check_dp_audit(s: Scenario, source: str) -> None:
    """``[audit.dp]``: the guesses fit in the canaries, and the defense has an audit level."""
    a = s.audit.dp
    if not a.canaries:
        return
    k_plus, k_minus = a.guess_counts()
    if k_plus + k_minus > a.canaries:
        raise ScenarioError(f"{source}: audit.dp.k_plus + audit.dp.k_minus = "
                            f"{k_plus + k_minus}: more guesses than audit.dp.canaries "
                            f"({a.canaries})")
    if k_plus + k_minus == 0:
        raise ScenarioError(f"{source}: audit.dp.k_plus = audit.dp.k_minus = 0: the audit "
                            "needs at least one guess")
    level = _defenses().get(s.defense.kind).dp_audit
    if level is None:
        allowed = [k for k in _defenses().names() if _defenses().get(k).dp_audit]
        raise ScenarioError(f"{source}: audit.dp.canaries = {a.canaries}: defense.kind = "
                            f"{s.defense.kind!r} has no DP audit; allowed: "
                            + ", ".join(allowed))
    if a.level != level:
        raise ScenarioError(f"{source}: audit.dp.level = {a.level!r}: defense.kind = "
                            f"{s.defense.kind!r} is audited at the {level} level; allowed: "
                            f"'auto', {level!r}")


def _check_references(s: Scenario, source: str) -> None:
    """The reference federations (fedaudit.references) are trained in-process as FedAvg
    with the clients' own training code: they reproduce the target's recipe for FedAvg
    only."""
    _registries()
    from attacks.registry import trains_references  # imported with the registries (torch)

    need = [m for m in s.attack.methods if trains_references(m)]
    if not (s.attack.enabled and need):
        return
    what = f"attack.methods lists {', '.join(need)} (reference-model attacks)"
    if s.federation.strategy != "FedAvg":
        raise ScenarioError(f"{source}: {what}: the reference models are trained as FedAvg "
                            f"federations; federation.strategy = {s.federation.strategy!r} is "
                            "not supported with them (allowed: 'FedAvg')")
    ref = s.attack.reference
    if ref.mode == "online" and ref.models % 2:  # the schema holds models >= 2
        raise ScenarioError(f"{source}: attack.reference.models = {ref.models}: online mode "
                            "needs an even number >= 2 (each audit sample is IN for half)")


def _check_attack_targets(s: Scenario, source: str) -> None:
    """Every listed attack has a target it runs on, and every target an attack."""
    a = s.attack
    if not a.enabled:
        return
    _registries()
    from attacks.registry import server_view  # imported with the registries (torch)

    server = [m for m in a.methods if server_view(m)]
    model = [m for m in a.methods if not server_view(m)]
    if server and "clients" not in a.targets:
        raise ScenarioError(f"{source}: attack.methods lists {', '.join(server)}, which "
                            "attacks the clients' models as the server receives them: add "
                            "'clients' to attack.targets")
    need_model = [t for t in a.targets if t in ("global", "quantized", "rounds")]
    if need_model and not model:
        raise ScenarioError(f"{source}: attack.targets = {list(a.targets)!r}: "
                            f"{', '.join(need_model)} need an attack on a released model; "
                            f"attack.methods lists only {', '.join(server)}")


def parse_override(text: str) -> tuple[str, str, Any]:
    """Parse ``section.key=value`` (TOML value syntax; a bare word is taken as a string)."""
    if "=" not in text:
        raise ScenarioError(f"--set {text!r}: expected section.key=value")
    path, raw = text.split("=", 1)
    path = path.strip()
    SCHEMA = schema()
    if "." not in path:
        raise ScenarioError(f"--set {text!r}: expected section.key=value "
                            f"(sections: {', '.join(SCHEMA)})")
    section, key = path.rsplit(".", 1)
    if section not in SCHEMA:
        raise ScenarioError(f"--set {text!r}: unknown table [{section}]; allowed: "
                            + ", ".join(SCHEMA))
    if key not in SCHEMA[section]:
        raise ScenarioError(f"--set {text!r}: unknown key '{path}'; allowed in [{section}]: "
                            + ", ".join(SCHEMA[section]))
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        # convenience: a bare word or path is a string (--set data.partitioner=dirichlet,
        # --set data.path=/tmp/x.npz); anything with quotes, brackets, braces, '=', '#' or
        # spaces is meant as TOML and must parse
        if raw and not re.search(r"[\s\"'\[\]{}=#]", raw):
            value = raw
        else:
            raise ScenarioError(f"--set {text!r}: value is not valid TOML "
                                "(quote strings, e.g. key=\"text\")") from None
    return section, key, value


def bundled_scenarios() -> dict[str, Path]:
    """Scenario files shipped with the package, by name."""
    root = resources.files("fedaudit.scenarios")
    return {p.name[:-5]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")}


def find_scenario(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ScenarioError(f"{name_or_path}: no such scenario file")
        return path
    bundled = bundled_scenarios()
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise ScenarioError(f"{name_or_path!r}: not a file and not a bundled scenario; bundled: "
                        + ", ".join(sorted(bundled)))


def load_scenario(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Load a scenario by bundled name or path, apply ``--set`` overrides, validate."""
    path = find_scenario(name_or_path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from None
    sections = _flatten_sections(raw, str(path))
    bundled = path.resolve().parent == Path(str(resources.files("fedaudit.scenarios"))).resolve()
    # a user's file names its data relative to itself; a bundled one relative to the
    # current directory (where `data/` would be)
    _absolute_paths(sections, Path.cwd() if bundled else path.resolve().parent)
    resolved = validate(sections, str(path), _apply_overrides(sections, overrides))
    # --set paths and the defaults are relative to the cwd: a run's scenario.toml must
    # mean the same from any directory
    return _absolute_data_paths(resolved, Path.cwd())


def _apply_overrides(sections: dict[str, dict[str, Any]],
                     overrides: list[str] | tuple[str, ...]) -> dict[tuple[str, str], str]:
    """Apply ``--set`` overrides to ``sections``; return where each value came from (for
    :func:`validate`'s messages)."""
    origins: dict[tuple[str, str], str] = {}
    for text in overrides:
        section, key, value = parse_override(text)
        sections.setdefault(section, {})[key] = value
        origins[(section, key)] = f"--set {text}"
    return origins


#: scenario keys holding file or folder paths (stored absolute in a resolved scenario)
PATH_KEYS = (("data", "path"), ("data", "data_dir"))


def _absolute(value: str, base: Path) -> str:
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def _absolute_paths(sections: dict[str, dict[str, Any]], base: Path) -> None:
    """Make the non-empty string paths of :data:`PATH_KEYS` absolute against ``base``
    (``~`` expanded), in place."""
    for sec, key in PATH_KEYS:
        value = sections.get(sec, {}).get(key)
        if isinstance(value, str) and value:
            sections[sec][key] = _absolute(value, base)


def _absolute_data_paths(scenario: Scenario, base: Path) -> Scenario:
    """:func:`_absolute_paths` for a validated scenario (paths from defaults included)."""
    d = scenario.data
    return scenario.replace(data=dataclasses.replace(
        d, path=_absolute(d.path, base) if d.path else "",
        data_dir=_absolute(d.data_dir, base) if d.data_dir else ""))


def scenario_from_dict(raw: dict[str, Any], overrides: list[str] | tuple[str, ...] = (),
                       source: str = "scenario dict") -> Scenario:
    """Validate a scenario given as a dict: nested like the TOML
    (``{"federation": {"rounds": 2}}``) or with dotted table names
    (``{"audit.gnq": {"client": False}}``); relative paths are taken from the cwd."""
    nested: dict[str, Any] = {}
    for sec, values in raw.items():
        node = nested
        for part in str(sec).split("."):
            node = node.setdefault(part, {})
        if not isinstance(values, dict):
            raise ScenarioError(f"{source}: [{sec}] must be a table (a dict)")
        node.update(copy.deepcopy(values))
    sections = _flatten_sections(nested, source)
    resolved = validate(sections, source, _apply_overrides(sections, overrides))
    return _absolute_data_paths(resolved, Path.cwd())


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


def from_toml(text: str, source: str = "scenario") -> Scenario:
    """Parse and validate a scenario given as TOML text (e.g. a run's scenario.toml)."""
    return validate(_flatten_sections(tomllib.loads(text), source), source)
