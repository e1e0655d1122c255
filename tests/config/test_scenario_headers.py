"""Every bundled scenario's header (its ``#`` lines before the first table) says how to run
it on data a reader can have, and that command validates (issue 60).

A command line of a header is ``#   fedaudit ...`` (``#``, three spaces, ``fedaudit``): at
least one is ``fedaudit run <the scenario's name>``.  Each is parsed with the CLI's own
parser and validated in this process as ``fedaudit validate`` / ``fedaudit matrix`` check it
before any work (schema, data, partitions, model, resources), from the repository root, so
``../shared/data/...`` is the project's shared copy (a case that names an absent one
skips).  Where the command is meant to fail on that copy, the next header line says so:
``#   (fails on this copy: TEXT)``, and the validation error must contain TEXT.

A scenario that asks for a GPU where none is visible is validated with
``--set federation.client_resources.num_gpus=0`` added, which its header must name (the
resource check is the one thing a CPU-only machine cannot check for it).  Nothing trains or
downloads: validation reads the data and builds the model once.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from fedaudit.config import ScenarioError, bundled_scenarios

from tests.helpers.docs import NO_GPU, NeedsShared, check_command
from tests.helpers.paths import ROOT

COMMAND = re.compile(r"^#   (fedaudit .*)$")
FAILS = re.compile(r"^#   \(fails on this copy: (.+)\)$")


def header(path: Path) -> list[str]:
    """The scenario file's lines before its first table."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            break
        lines.append(line)
    return lines


@dataclass(frozen=True)
class Command:
    scenario: str  # the bundled scenario whose header holds the line
    line: int  # 1-based line number in the file
    text: str  # the command, without "#   "
    fails_with: str | None  # the text of a "(fails on this copy: ...)" line after it

    @property
    def id(self) -> str:
        return f"{self.scenario}:{self.line}"


def commands(name: str, path: Path) -> list[Command]:
    lines = header(path)
    found = []
    for i, line in enumerate(lines):
        if m := COMMAND.match(line):
            nxt = FAILS.match(lines[i + 1]) if i + 1 < len(lines) else None
            found.append(Command(name, i + 1, m.group(1), nxt.group(1) if nxt else None))
    return found


SCENARIOS = sorted(bundled_scenarios().items())
COMMANDS = [c for name, path in SCENARIOS for c in commands(name, path)]


def test_the_registry_lists_every_scenario_file():
    assert {n for n, _ in SCENARIOS} == {p.stem for p in (ROOT / "scenarios").glob("*.toml")}


def _asks_for_gpu(path: Path) -> bool:
    fed = tomllib.loads(path.read_text(encoding="utf-8")).get("federation", {})
    return fed.get("client_resources", {}).get("num_gpus", 0) > 0


@pytest.mark.parametrize("name, path", SCENARIOS, ids=[n for n, _ in SCENARIOS])
def test_header_says_how_to_run_it(name, path):
    lines = header(path)
    assert lines and all(ln.startswith("#") or not ln.strip() for ln in lines), \
        f"{path.name}: the header is the comment before the first table"
    runs = [c for c in commands(name, path)
            if shlex.split(c.text)[1:3] == ["run", name]]
    assert runs, (f"{path.name}: no header line `#   fedaudit run {name} [--set key=value ...]`"
                  " naming the data it validates with")
    for i, line in enumerate(lines):  # a "fails" line belongs to the command just above it
        if FAILS.match(line):
            assert i > 0 and COMMAND.match(lines[i - 1]), \
                f"{path.name}:{i + 1}: {line!r} follows no command line"
    if _asks_for_gpu(path):
        assert f"--set {NO_GPU}" in "\n".join(lines), \
            f"{path.name} asks for a GPU: its header must say to add --set {NO_GPU} without one"


def _validate(text: str) -> None:
    """What the header's ``fedaudit ...`` line checks before any work, as the README's and
    the guide's commands are checked (tests/helpers/docs.py, which adds :data:`NO_GPU` where
    the scenario asks for a GPU this machine lacks, as the header tells); raises
    ScenarioError, or NeedsShared where it names an absent ``../shared``."""
    assert check_command(text).how == "validated", \
        f"{text}: a header command runs, validates or matrixes a scenario"


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.id for c in COMMANDS])
def test_header_command_validates(cmd, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        if cmd.fails_with is None:
            _validate(cmd.text)
            return
        with pytest.raises(ScenarioError) as exc:
            _validate(cmd.text)
    except NeedsShared:
        pytest.skip("../shared is absent on this machine")
    assert cmd.fails_with in str(exc.value), \
        f"{cmd.id}: the header says it fails with {cmd.fails_with!r}; the error: {exc.value}"
    assert "\n" not in str(exc.value)  # one line, as the CLI prints it


@pytest.mark.parametrize("max_samples", [1000, 0])
def test_a_split_larger_than_the_data_names_the_shortfall(tmp_path, capsys, max_samples):
    """The cause a "fails on this copy" line names, for any scenario: where data.max_samples
    asks for more samples than the data has, the size check that fails says how many the
    split needs (train + holdout + test) and how many the data has; one line, exit code 2."""
    import numpy as np

    from fedaudit.cli import main
    from fedaudit.data import split_ids

    from tests.helpers.npz_scenario import write_npz

    write_npz(tmp_path / "mine.npz")  # 120 samples
    toml = tmp_path / "mine.toml"
    toml.write_text('[scenario]\nname = "mine"\n[data]\ndataset = "npz"\npath = "mine.npz"\n'
                    f"max_samples = {max_samples}\nholdout_fraction = 0.4\ntest_fraction = 0.1\n"
                    '[federation]\nnum_clients = 2\nrounds = 1\n'
                    '[attack]\nmethods = ["loss", "rmia"]\n[attack.reference]\npopulation = 100\n')
    assert main(["validate", str(toml)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attack.reference.population = 100: the holdout split" in err
    if not max_samples:  # all the data, whatever its size: no shortfall to name
        assert "the split needs" not in err
        return
    train, holdout, test = map(len, split_ids(np.arange(1000) % 3, 0.4, 0.1, 0))
    assert err.startswith(
        f"fedaudit: error: data: the split needs 1,000 samples ({train} train + {holdout} "
        f"holdout + {test} test, data.max_samples = 1000), the data has 120: ")
