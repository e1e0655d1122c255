"""The labs executed (markers: labs, e2e): the challenge made and graded end to end, every
solution notebook passes its checks, every student notebook fails at its first check
with the TODO message, the lab cache shared across folders."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from fedaudit.labs.challenge import grade, write_submission
from fedaudit.labs.checks.challenge import null_auc_sd

from tests.helpers.labs import LABS, error_cell, execute_notebook, fedaudit_cli
from tests.helpers.paths import SHARED_DATA


CHALLENGE_SEED = 0  # the seed lab 8 uses: the notebook reuses the challenge made here


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory):
    """One folder of lab runs for the module: labs that share a federation train it once."""
    path = tmp_path_factory.mktemp("lab-runs")
    saved = os.environ.get("FEDAUDIT_LAB_DIR")
    os.environ["FEDAUDIT_LAB_DIR"] = str(path)
    yield path
    if saved is None:
        os.environ.pop("FEDAUDIT_LAB_DIR", None)
    else:
        os.environ["FEDAUDIT_LAB_DIR"] = saved


@pytest.fixture(scope="module")
def notebook_cwd(tmp_path_factory):
    """One working directory for every notebook, as a student has (lab_run's cache is
    keyed by what the data paths hold, not where: test_lab_cache_is_shared_across_folders)."""
    return tmp_path_factory.mktemp("notebooks")


#: the challenge's MNIST (the npz copy of the shared data, never a download in a test); the
#: bundled digits where it is absent (too few non-members for a leaderboard: --allow-weak)
MNIST = SHARED_DATA / "mnist.npz"
CHALLENGE_DATA = (["--data", str(MNIST)] if MNIST.is_file()
                  else ["--data", "digits", "--allow-weak"])


@pytest.fixture(scope="module")
def challenge(lab_dir):
    out = fedaudit_cli("lab", "challenge", "--seed", str(CHALLENGE_SEED), "--out", str(lab_dir),
               *CHALLENGE_DATA)
    assert out.returncode == 0, out.stderr[-3000:]
    root = Path(out.stdout.strip().splitlines()[-1])
    assert root == lab_dir / f"challenge-{CHALLENGE_SEED}"
    return root


@pytest.mark.labs
def test_cli_challenge_round_trip(challenge, tmp_path):
    student = challenge / "student"
    assert sorted(p.name for p in student.iterdir()) == ["candidates.npz", "model.json",
                                                         "model.pt"]
    with open(challenge / "key.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    ids = np.array([int(r["id"]) for r in rows])
    member = np.array([int(r["member"]) for r in rows])
    with np.load(student / "candidates.npz") as npz:
        assert sorted(npz.files) == ["id", "x", "y"]
        assert np.array_equal(np.sort(npz["id"]), np.sort(ids))
        assert len(npz["x"]) == len(ids)
    assert set(member.tolist()) == {0, 1}
    truth = write_submission(tmp_path / "truth.csv", ids, member)
    out = fedaudit_cli("lab", "grade", str(truth), "--key", str(challenge / "key.csv"))
    assert out.returncode == 0, out.stderr
    name, tpr1, auc, *_ = out.stdout.strip().split(",")
    assert (name, float(tpr1), float(auc)) == ("truth", 1.0, 1.0)
    rnd = np.random.default_rng(0).random(len(ids))
    g = grade(write_submission(tmp_path / "random.csv", ids, rnd), challenge / "key.csv")
    assert abs(g.auc - 0.5) <= 4 * null_auc_sd(g.n_members, g.n_nonmembers)
    # a second challenge with the same seed and folder never replaces the key
    again = fedaudit_cli("lab", "challenge", "--seed", str(CHALLENGE_SEED), "--out",
                 str(challenge.parent), *CHALLENGE_DATA)
    assert again.returncode == 2 and "already exists" in again.stderr
    info = json.loads((challenge / "challenge.json").read_text())
    assert (info["n_members"], info["n_nonmembers"]) == (int(member.sum()),
                                                        int((member == 0).sum()))
    if MNIST.is_file():  # the leaderboard's data: tens of false positives at 1% FPR
        assert info["n_nonmembers"] >= 2000 and not info["weak"]


LAB_SOURCES = sorted(p.stem for p in (LABS / "src").glob("lab*.py"))


def _needs(lab: str, request) -> None:
    """What a lab's notebook needs before it runs: lab 8 the challenge made by the fixture
    (the notebook reuses it); lab 9 a play to train on (tinyshakespeare.txt where
    ``fedaudit.labs.text_path`` looks: never a download), else the test is skipped."""
    if lab == "lab8_challenge":
        request.getfixturevalue("challenge")
    if lab == "lab9_secret_sharer":
        from fedaudit.labs import text_path

        try:
            text_path()
        except FileNotFoundError as exc:
            pytest.skip(f"lab 9 needs a text file: {exc}")


@pytest.mark.labs
@pytest.mark.parametrize("lab", LAB_SOURCES)
def test_solution_notebook_passes_its_checks(lab, lab_dir, notebook_cwd, request):
    _needs(lab, request)
    nb, error = execute_notebook(LABS / "solutions" / f"{lab}.ipynb", notebook_cwd)
    assert error is None, str(error)[-3000:]
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        assert text.startswith("ok  Task "), (lab, cell.source, text)
    assert not any(notebook_cwd.glob("lab-runs")), "runs must go to $FEDAUDIT_LAB_DIR"


@pytest.mark.labs
@pytest.mark.parametrize("lab", LAB_SOURCES)
def test_student_notebook_fails_at_its_first_check(lab, lab_dir, notebook_cwd, request):
    _needs(lab, request)
    nb, error = execute_notebook(LABS / f"{lab}.ipynb", notebook_cwd)
    assert error is not None, f"{lab}: the unfinished notebook ran to the end"
    index, out = error_cell(nb)
    first_check = next(i for i, c in enumerate(nb.cells)
                       if "check" in c.metadata.get("tags", []))
    assert index == first_check, (lab, nb.cells[index].source if index is not None else None)
    assert out["ename"] == "LabCheckError"
    assert "is not done yet: the cell above still has a TODO" in out["evalue"], out["evalue"]
    # the message alone: no frames of the check's code around it
    assert out["traceback"] == [f"LabCheckError: {out['evalue']}"], out["traceback"]


@pytest.mark.labs
def test_lab_cache_is_shared_across_folders(tmp_path, monkeypatch):
    import fedaudit.labs.runs as runs

    trained = []
    real_run = runs.run
    monkeypatch.setattr(runs, "run", lambda *a, **k: trained.append(1) or real_run(*a, **k))
    monkeypatch.setenv("FEDAUDIT_LAB_DIR", str(tmp_path / "lab-runs"))
    tiny = ("federation.rounds=1", "federation.num_clients=2", "audit.quantization.enabled=false",
            "audit.gnq.client=false", "attack.methods=['loss']")
    results = []
    for folder in ("course", "home"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        results.append(runs.lab_run("quickstart", tiny).results)
    assert len(trained) == 1
    assert results[0]["attacks"] == results[1]["attacks"]
