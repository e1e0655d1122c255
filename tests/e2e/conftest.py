"""Everything collected below tests/e2e/ is marked ``e2e``: ``-m e2e`` selects the runs
through the real Flower + Ray path (and the notebooks, Flower's deployment, a Ray
cluster), ``-m "not e2e"`` the unit tests, without a marker in any test file."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
