"""Server side of a run: federated rounds through the auditing strategy, then the
post-training audit (quantization, r_Qn, attacks) and ``results.json``."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

from fedaudit.config import ScenarioError, load_scenario, to_toml
from strategies import wire
from fedaudit.data import FederatedData, build_federated_data
from fedaudit.audit import run_audit
from fedaudit.audit.results import add_defense_results, assemble_results
from fedaudit.audit.probing import run_probes
from fedaudit.probes import ProbeRun
from fedaudit.rundir import atomic_write_json, atomic_write_text, create_run_dir
from fedaudit.rundir.layout import RESULTS_NAME, SCENARIO_NAME
from fedaudit.console.progress import NoProgress, Progress
from fedaudit.simulation.recorder import RunRecorder
from fedaudit.simulation.reference_federations import reference_trainer
from fedaudit.simulation.strategy_factory import make_strategy
from fedaudit.simulation.update_attack_jobs import update_job_runner
from fedaudit.scenario import Scenario
from fedaudit.servers import server_of
from fedaudit.training import pick_device
from strategies.auditing import AuditingStrategy
from strategies.secure_aggregation import run_secagg_rounds
from fedaudit.probes.secure_aggregation import NAME as SECAGG

log = logging.getLogger("fedaudit")

# Flower's in-memory grid (simulation) polls for the clients' replies every 0.1 s by
# default; a steady quickstart round is about 0.1 s of client work, so the poll alone
# added up to 0.1 s per send_and_receive (bench/sim.py, sim_round_ratio).  A poll is a
# dictionary lookup under a lock.
REPLY_POLL_SECONDS = 0.005


def train_federation(grid: Grid, scenario: Scenario, data: FederatedData, run_dir: Path,
                     device: torch.device, progress: Progress | None, *, train_seed: int,
                     subdir: str = "", resume: bool = False) -> RunRecorder:
    """All rounds of one federated training run (the remaining ones when resuming)."""
    recorder = RunRecorder(scenario, data, run_dir, device, progress, train_seed=train_seed,
                           subdir=subdir)
    done = recorder.resume_point() if resume else 0
    rounds = scenario.federation.rounds
    if progress is not None and done:
        for rec in recorder.rounds:
            progress.round_done(rec["round"], rec)
    if done >= rounds:
        return recorder
    probes = [cls(ProbeRun(scenario, run_dir, subdir, recorder.model))
              for cls in run_probes(scenario, released=not subdir)]
    strategy = AuditingStrategy(make_strategy(scenario, seed=train_seed), on_round=recorder,
                                probes=probes, run_dir=run_dir, subdir=subdir,
                                min_clients=scenario.federation.min_clients,
                                round_offset=done,
                                modify=_malicious_hand(scenario, data))
    train_config = ConfigRecord({wire.SCENARIO: to_toml(scenario), wire.TRAIN_SEED: train_seed})
    if scenario.federation.aggregation == SECAGG:
        run_secagg_rounds(grid, strategy, initial_arrays=ArrayRecord(recorder.current),
                          num_rounds=rounds - done, train_config=train_config,
                          secagg=scenario.federation.secagg,
                          timeout=scenario.federation.timeout)
    else:
        strategy.start(grid=grid, initial_arrays=ArrayRecord(recorder.current),
                       num_rounds=rounds - done, timeout=scenario.federation.timeout,
                       train_config=train_config)
    spent = getattr(strategy.strategy, "privacy_spent", lambda: None)()
    if spent is not None:  # Flower's live accountant (this start() only; not resumed rounds)
        recorder.live_privacy = {"epsilon": spent.epsilon, "delta": spent.delta,
                                 "releases": spent.num_releases, "resumed_from_round": done}
    return recorder


def _malicious_hand(scenario: Scenario, data: FederatedData):
    """The scenario's server's :meth:`~fedaudit.servers.base.Server.modify` on Flower's
    arrays, or None for a server that sends the global model as it is."""
    server = server_of(scenario)
    if not server.modifies_rounds():
        return None

    def modify(round_: int, arrays: ArrayRecord) -> ArrayRecord:
        new = server.modify(round_, arrays.to_torch_state_dict(), scenario, data)
        return arrays if new is None else ArrayRecord(new)

    return modify


def wait_for_nodes(grid: Grid, wanted: int, timeout: float = 60.0) -> None:
    """Fail clearly (instead of waiting forever in flwr's sampler) when the federation has
    fewer SuperNodes than the scenario has clients."""
    deadline = time.monotonic() + timeout
    while (have := len(list(grid.get_node_ids()))) < wanted:
        if time.monotonic() > deadline:
            raise ScenarioError(
                f"federation.num_clients = {wanted}, but only {have} SuperNodes connected "
                f"within {timeout:.0f} s; start more SuperNodes (simulation: flwr federation "
                f"simulation-config ... --num-supernodes {wanted})")
        time.sleep(0.5)


def execute(grid: Grid, scenario: Scenario, run_dir: Path, progress: Progress | None = None,
            *, resume: bool = False, counterfactual: Path | None = None) -> dict:
    """Run the whole scenario on ``grid``; return the results (also written to disk).
    With ``resume`` continue after the last finished round found in ``run_dir``;
    ``counterfactual``: the honest run of the same federation (:func:`fedaudit.audit.run_audit`)."""
    progress = progress or NoProgress()
    t0 = time.perf_counter()
    seed = scenario.seed
    torch.manual_seed(seed)
    random.seed(seed)
    data = build_federated_data(scenario)
    for note in data.notes:  # the loader's warnings, also when the data came from a cache
        log.warning("%s", note)
    device = pick_device(scenario.train.device)
    if hasattr(grid, "pull_interval"):  # InMemoryGrid; a deployed grid keeps its own
        grid.pull_interval = REPLY_POLL_SECONDS
    wait_for_nodes(grid, scenario.federation.num_clients)
    recorder = train_federation(grid, scenario, data, run_dir, device, progress,
                                train_seed=seed, resume=resume)
    extra: list[RunRecorder] = []
    quant = scenario.audit.quantization
    if quant.enabled:
        for s in quant.seeds:
            if s == seed:
                continue
            progress.phase(f"extra trajectory, training seed {s}")
            random.seed(s)
            extra.append(train_federation(grid, scenario, data, run_dir, device, None,
                                          train_seed=s, subdir=f"seed-{s}", resume=resume))
    t_train = time.perf_counter() - t0

    results = assemble_results(scenario, data, recorder, run_dir)
    add_defense_results(results, scenario, recorder, n_extra=len(extra))
    timing = run_audit(scenario, data, recorder.trajectory(), [r.trajectory() for r in extra],
                       run_dir, results, device, progress,
                       reference_trainer=reference_trainer(scenario, data, grid),
                       update_runner=update_job_runner(scenario, grid),
                       counterfactual=counterfactual)
    results["timing"] = {"total_seconds": time.perf_counter() - t0, "train_seconds": t_train,
                         **timing}
    if resume:
        results["timing"]["resumed"] = True
    atomic_write_json(run_dir / RESULTS_NAME, results)
    progress.phase("done")
    return results


# ---- `flwr run .` entry point -------------------------------------------------------
server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """ServerApp for ``flwr run .`` (and ``fedaudit deploy``): the scenario, ``--set``
    overrides (``;``-separated) and output folder come from the run config
    (``[tool.flwr.app.config]`` or ``--run-config``).  The scenario and the SuperNode count
    are checked before the run directory is created, so a failed start leaves nothing; the
    run directory is printed as an absolute path and gets its report.html."""
    from fedaudit.config.preflight import check_scenario
    from fedaudit.rundir.runlog import run_logging

    cfg = context.run_config
    overrides = [s for s in str(cfg.get("set", "")).split(";") if s.strip()]
    scenario = check_scenario(load_scenario(str(cfg.get("scenario", "quickstart")), overrides))
    wait_for_nodes(grid, scenario.federation.num_clients)
    run_dir = create_run_dir(str(cfg.get("out", "runs")), scenario.name).resolve()
    atomic_write_text(run_dir / SCENARIO_NAME, to_toml(scenario))
    with run_logging(run_dir, verbose=True):
        execute(grid, scenario, run_dir)
        from fedaudit.report import write_report

        try:
            write_report(run_dir)
        except Exception as exc:  # noqa: BLE001 - the run directory itself is complete
            log.warning("report not written (%s: %s); retry with: fedaudit report %s",
                        type(exc).__name__, exc, run_dir)
    print(run_dir, flush=True)
