"""The report tests' fake runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.fake_runs import write_fake_run


@pytest.fixture()
def two_runs(tmp_path) -> list[Path]:
    return [write_fake_run(tmp_path / "quickstart-defended-20250101-120000"),
            write_fake_run(tmp_path / "quickstart-defended-20250101-130000", defense="dp-sgd",
                           epsilon=3.21)]
