"""Everything ``fedaudit run`` checks before it trains (also ``fedaudit validate``):
schema, ranges and choices (config), data availability and partitions, model vs data shape,
and the resource requests Ray would otherwise wait on forever."""

from __future__ import annotations

import os
from pathlib import Path

from fedaudit.aggregators import AGGREGATORS, aggregator_of
from fedaudit.config import ScenarioError, from_toml, load_scenario
from fedaudit.data import build_federated_data
from fedaudit.data.federated import blaming_shortfall
from fedaudit.probes.aggregation import aggregation_of
from fedaudit.servers import served_model
from fedaudit.rundir.layout import SCENARIO_NAME, rounds_path
from fedaudit.scenario import Scenario


def check_resources(scenario: Scenario) -> None:
    """Client actors must fit on the machine, or Ray never schedules them (a silent hang)."""
    if scenario.federation.init_args.address:
        return  # an existing cluster: its resources are not known here
    res = scenario.federation.client_resources
    cpus = scenario.federation.init_args.num_cpus or os.cpu_count() or 1
    if res.num_cpus > cpus:
        raise ScenarioError(f"federation.client_resources.num_cpus = {res.num_cpus}: more than "
                            f"the {cpus} CPUs Ray will have; allowed: > 0 and <= {cpus}")
    if res.num_gpus > 0:
        import torch

        gpus = torch.cuda.device_count()
        if scenario.federation.init_args.num_gpus >= 0:
            gpus = min(gpus, scenario.federation.init_args.num_gpus)
        if gpus == 0:
            raise ScenarioError(f"federation.client_resources.num_gpus = {res.num_gpus}: no GPU "
                                "is visible here; set it to 0 (CPU actors) or run on a GPU machine")
        if res.num_gpus > gpus:
            raise ScenarioError(f"federation.client_resources.num_gpus = {res.num_gpus}: more "
                                f"than the {gpus} GPUs visible; allowed: <= {gpus}")


def check_attack_options(scenario: Scenario, sample_shape: tuple[int, ...]) -> None:
    """Options an attack can only check against the data's shape (Res-MIA's steps, sizes
    and schedule against the image size): each attack's ``cost(sample_shape, **options)``
    raises ``ValueError`` for them, here before training instead of after it."""
    if not scenario.attack.enabled:
        return
    from attacks.membership.registry import ATTACKS
    from fedaudit.audit.sets import attack_options

    for method, opts in attack_options(scenario).items():
        cost = ATTACKS.meta(method).get("cost")
        if cost is None:
            continue
        try:
            cost(sample_shape, **opts)
        except ValueError as exc:
            raise ScenarioError(f"attack.{method}: {exc} (the data's samples are "
                                f"{'x'.join(map(str, sample_shape))})") from None


def check_scenario(scenario: Scenario) -> Scenario:
    """Data, partitions, model, attack options and resources of an already
    schema-validated scenario."""
    check_resources(scenario)
    data = build_federated_data(scenario)
    check_attack_options(scenario, tuple(data.x.shape[1:]))
    from fedaudit.audit.stages import check_stage_data

    # the stages' and the aggregation's size checks name the missing data as their cause
    # when the data is smaller than the scenario's data.max_samples
    with blaming_shortfall(scenario.data, len(data.y), text=data.text is not None):
        if msg := check_stage_data(scenario, data):
            raise ScenarioError(msg)
        aggregation = aggregation_of(scenario)
        if aggregation.check_data is not None and (msg := aggregation.check_data(scenario, data)):
            raise ScenarioError(msg)
    try:
        served_model(scenario, data, seed=scenario.seed)(__import__("torch").from_numpy(data.x[:2].copy()))
    except RuntimeError as exc:
        raise ScenarioError(f"model.name = {scenario.model.name!r} does not fit the data "
                            f"shape {tuple(data.x.shape[1:])}: {str(exc).splitlines()[0]}") from None
    return scenario


def validate_all(name: str, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Load, validate and check a scenario by bundled name or path."""
    return check_scenario(load_scenario(name, overrides))


def load_resume(run_dir: str | os.PathLike) -> Scenario:
    """The scenario of a run directory to resume, with the checks resuming needs."""
    path = Path(run_dir)
    toml = path / SCENARIO_NAME
    if not path.is_dir():
        raise ScenarioError(f"--resume {run_dir}: no such run directory")
    if not toml.is_file():
        raise ScenarioError(f"--resume {run_dir}: no scenario.toml; not a fedaudit run directory")
    try:
        scenario = from_toml(toml.read_text(encoding="utf-8"), str(toml))
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(f"{toml}: not a valid scenario: {exc}") from None
    strategy = aggregator_of(scenario)
    if strategy.server_state and rounds_path(path).exists():
        stateless = [a.name for a in AGGREGATORS.values() if not a.server_state]
        raise ScenarioError(f"--resume {run_dir}: federation.strategy = {strategy.name!r} keeps "
                            "server optimizer state between rounds that is not checkpointed; "
                            f"resume supports the stateless strategies ({', '.join(stateless)})")
    return check_scenario(scenario)
