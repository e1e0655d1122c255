"""Run a scenario in-process through Flower's simulation runtime on Ray
(:mod:`fedaudit.simulation.runtime`: why it is ``run_simulation``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from fedaudit.config import to_toml
from fedaudit.rundir import atomic_write_text, create_run_dir
from fedaudit.rundir.layout import LOG_NAME, SCENARIO_NAME
from fedaudit.rundir.runlog import run_logging
from fedaudit.scenario import Scenario

log = logging.getLogger("fedaudit")


def backend_config(scenario: Scenario) -> dict:
    """Ray backend settings: ``client_resources`` bound how many clients run at once
    (a fractional ``num_gpus`` packs several GPU actors on one GPU); ``init_args`` go to
    ``ray.init`` (``address`` joins an existing cluster)."""
    res = scenario.federation.client_resources
    ini = scenario.federation.init_args
    init: dict = {"logging_level": ini.logging_level, "log_to_driver": ini.log_to_driver,
                  "include_dashboard": False}
    if ini.address:
        init["address"] = ini.address
    else:  # resources can only be set when Ray starts here
        if ini.num_cpus:
            init["num_cpus"] = ini.num_cpus
        if ini.num_gpus >= 0:
            init["num_gpus"] = ini.num_gpus
        if ini.object_store_memory:
            init["object_store_memory"] = ini.object_store_memory
    return {"client_resources": {"num_cpus": res.num_cpus, "num_gpus": float(res.num_gpus)},
            "init_args": init}


def run(scenario: Scenario, out: str | os.PathLike = "runs", *, progress=None,
        verbose: bool = False, resume_dir: str | os.PathLike | None = None,
        counterfactual: str | os.PathLike | None = None) -> tuple[Path, dict]:
    """Run a validated scenario; return (run directory, results).  With ``resume_dir``
    (a run directory holding this scenario) continue after its last finished round;
    ``counterfactual``: the run directory of the same federation under an honest server
    (``fedaudit matrix``'s main run), which a malicious server's stage compares with."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from fedaudit.simulation.plugins import client_app_with_plugins, user_plugins
    from fedaudit.simulation.runtime import simulate
    from fedaudit.simulation.server import execute

    client_app = client_app_with_plugins(user_plugins())

    if resume_dir is None:
        run_dir = create_run_dir(out, scenario.name)
        atomic_write_text(run_dir / SCENARIO_NAME, to_toml(scenario))
    else:
        run_dir = Path(resume_dir)
    if progress is not None:
        progress.started(run_dir)
    holder: dict = {}
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        holder["results"] = execute(
            grid, scenario, run_dir, progress, resume=resume_dir is not None,
            counterfactual=None if counterfactual is None else Path(counterfactual))

    with run_logging(run_dir, verbose):
        log.info("%s run directory %s", "resuming" if resume_dir else "new", run_dir)
        simulate(server_app, client_app, num_supernodes=scenario.federation.num_clients,
                 backend_config=backend_config(scenario), verbose=verbose)
    if "results" not in holder:
        raise RuntimeError(f"the simulation ended without results; see {run_dir / LOG_NAME}")
    return run_dir, holder["results"]
