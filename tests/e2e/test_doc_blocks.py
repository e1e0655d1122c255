"""The Python blocks of the README and the user guide that train (``fedaudit.run``,
``.matrix``, ``.sweep``) run as printed, in a fresh folder; the others run in
tests/docs/test_docs.py, the shell commands are checked there too."""

import pytest

from tests.helpers.docs import DOCS, blocks

TRAINING = [b for d in DOCS for b in blocks(d) if b.trains]


@pytest.mark.parametrize("block", TRAINING, ids=[b.id for b in TRAINING])
def test_every_training_python_block_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a run's default --out is ./runs
    namespace: dict = {"__name__": "docs_block"}
    exec(compile(block.source, block.id, "exec"), namespace)
    runs = list((tmp_path / "runs").glob("*/results.json"))
    assert runs, f"{block.id} ran no scenario into ./runs"
