import os
import tempfile

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# reference models (fedaudit.audit.reference_models) are cached under $FEDAUDIT_CACHE: the suite
# (and the runs it starts in subprocesses) never writes to the user's cache
os.environ["FEDAUDIT_CACHE"] = tempfile.mkdtemp(prefix="fedaudit-test-cache-")


import json

import pytest


def pytest_configure(config):
    """``FEDAUDIT_TEST_THREADS=N`` runs the suite with ``torch.set_num_threads(N)``: every
    tolerance must hold whatever blocking the thread count gives the float kernels
    (``make test`` runs the unit tests with 1 thread and the end-to-end tests with 2; a plain
    ``pytest`` uses torch's default, the machine's cores)."""
    threads = os.environ.get("FEDAUDIT_TEST_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


class FixedOracle:
    """An oracle that returns fixed probabilities: row ``x[i]`` of ``proba`` for sample i
    (the tests pass row indices as samples), counting queries like the real one."""

    def __init__(self, proba):
        import numpy as np

        self.proba = np.asarray(proba, dtype=np.float64)
        self.queries = 0

    def predict_proba(self, x):
        import numpy as np

        self.queries += len(x)
        return self.proba[np.asarray(x, dtype=int)]


def _single_thread():
    # tiny tensors on a busy 2-core machine: with 2 threads the OpenMP workers spin against
    # each other (and against Ray actors) and the tests run several times slower
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


one_thread = pytest.fixture()(_single_thread)
one_thread_module = pytest.fixture(scope="module")(_single_thread)


@pytest.fixture()
def identity():
    """Flower messages need a task identity; tests that build them by hand set one."""
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 0
    yield
    TaskIdentity.task_id = TaskIdentity.run_id = TaskIdentity.node_id = None


def result_numbers(res: dict) -> str:
    """results.json as canonical JSON without what may differ between identical runs
    (timings and the run directory)."""
    res = json.loads(json.dumps(res, default=str))
    for key in ("timing", "run_dir"):
        res.pop(key, None)
    for m in res.get("attacks", {}).values():
        m.pop("seconds_per_sample", None)
    for q in res.get("quantization", []):
        for m in q["attacks"].values():
            m.pop("seconds_per_sample", None)
    return json.dumps(res, sort_keys=True)
