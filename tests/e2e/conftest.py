"""Everything collected below tests/e2e/ is marked ``e2e``: ``-m e2e`` selects the runs
through the real Flower + Ray path (and the notebooks, Flower's deployment, a Ray
cluster), ``-m "not e2e"`` the unit tests, without a marker in any test file.  Runs that
several test files check are session fixtures here (each costs a Ray start-up and a
federation)."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def malicious_secagg_run(tmp_path_factory):
    """One run of the malicious server through SecAgg+ (``MALICIOUS_SMALL``), shared by
    test_imprint_run.py (what it reads back) and test_stage_writes_runs.py (what its stages
    wrote): its run directory and who wrote which results.json paths."""
    from fedaudit.config import load_scenario
    from fedaudit.simulation.runner import run

    from tests.helpers.writes import MALICIOUS_SMALL, recording_writes

    with recording_writes() as seen:
        run_dir, _ = run(load_scenario("malicious-server", [
            *MALICIOUS_SMALL, "federation.aggregation=secagg+"]),
            tmp_path_factory.mktemp("malicious-secagg"))
    return run_dir, dict(seen)
