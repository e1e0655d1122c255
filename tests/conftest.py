"""What every test has: a private reference-model cache, the thread count of
``FEDAUDIT_TEST_THREADS``, and the fixtures used across folders (one torch thread, a
Flower task identity).  Code the tests share is in ``helpers/``; this conftest is
``tests.conftest`` (every folder is a package: two test modules of the same name in
different folders never collide)."""

import os
import tempfile

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# reference models (fedaudit.audit.reference_models) are cached under $FEDAUDIT_CACHE: the suite
# (and the runs it starts in subprocesses) never writes to the user's cache
os.environ["FEDAUDIT_CACHE"] = tempfile.mkdtemp(prefix="fedaudit-test-cache-")


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
