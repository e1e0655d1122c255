"""The classroom labs (labs/, fedaudit.labs): notebooks built from their sources, checks
that pass on right answers and fail on wrong or unfinished ones, the challenge's grading,
and -- under the ``labs`` marker -- every notebook executed with nbclient."""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedaudit.labs import LabCheckError, todo
from fedaudit.labs.challenge import SubmissionError, grade, write_submission
from fedaudit.labs.checks.challenge import null_auc_sd

ROOT = Path(__file__).resolve().parent.parent
LABS = ROOT / "labs"
FEDAUDIT = [sys.executable, "-m", "fedaudit.cli"]


def _build_module():
    spec = importlib.util.spec_from_file_location("labs_build", LABS / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


# ---- the single source ---------------------------------------------------------------------

def test_committed_notebooks_equal_their_build():
    build = _build_module()
    assert build.sources(), "no lab sources found"
    assert build.main(["--check"]) == 0, "run: python labs/build.py"


def test_build_splits_solution_and_stub(tmp_path):
    build = _build_module()
    src = tmp_path / "lab9_demo.py"
    src.write_text("# %% [markdown]\n# # Title\n#\n# text\n# %%\ndef f(x):\n"
                   "    ### BEGIN SOLUTION\n    return x + 1\n    ### STUB\n"
                   "    return todo('f')\n    ### END SOLUTION\n# %% check\ncheck(f)\n"
                   "# %% [markdown] answer\n# the answer\n")
    student, solution = build.build(src)
    assert [c.cell_type for c in student.cells] == ["markdown", "code", "code"]
    assert [c.cell_type for c in solution.cells] == ["markdown", "code", "code", "markdown"]
    assert student.cells[0].source == "# Title\n\ntext"
    assert solution.cells[1].source == "def f(x):\n    return x + 1"
    assert student.cells[1].source == "def f(x):\n    return todo('f')"
    assert student.cells[1].metadata["tags"] == ["todo"]
    assert solution.cells[1].metadata["tags"] == ["solution"]
    assert student.cells[2].metadata["tags"] == ["check"]
    assert "###" not in student.cells[1].source + solution.cells[1].source
    # ids derive from the position: two builds are identical
    assert build.render(build.build(src)[0]) == build.render(student)


@pytest.mark.parametrize("body, message", [
    ("    ### BEGIN SOLUTION\n    x = 1\n", "not closed"),
    ("    ### STUB\n", "outside a solution block"),
    ("    ### BEGIN SOLUTION\n    ### END SOLUTION\n", "without ### STUB"),
])
def test_build_rejects_broken_markers(tmp_path, body, message):
    build = _build_module()
    src = tmp_path / "lab9_bad.py"
    src.write_text("# %%\ndef f():\n" + body)
    with pytest.raises(SystemExit, match=message):
        build.build(src)


def test_every_lab_has_todos_checks_and_reflection():
    build = _build_module()
    for src in build.sources():
        student, solution = build.build(src)
        tags = [c.metadata.get("tags", []) for c in student.cells]
        assert any("todo" in t for t in tags), src.name
        assert any("check" in t for t in tags), src.name
        # the first TODO comes before the first check (the shipped notebook fails there)
        first_todo = next(i for i, t in enumerate(tags) if "todo" in t)
        first_check = next(i for i, t in enumerate(tags) if "check" in t)
        assert first_todo < first_check, src.name
        assert any("Reflection" in c.source for c in student.cells
                   if c.cell_type == "markdown"), src.name
        assert not any("todo(" in c.source for c in solution.cells if c.cell_type == "code"), \
            f"{src.name}: a solution cell still calls todo()"
        # notebooks use the Python API, never the shell
        code = "\n".join(c.source for c in solution.cells if c.cell_type == "code")
        assert "subprocess" not in code and "\n!" not in "\n" + code, src.name


# ---- checks ----------------------------------------------------------------------------------

def test_a_todo_fails_its_check_with_the_todo_message():
    from fedaudit.labs.checks import loss_attack

    def unfinished(proba, y):
        return todo("loss_scores: log of the probability of the true label")

    with pytest.raises(LabCheckError, match=r"Task 2\.1 is not done yet: the cell above "
                                            r"still has a TODO \(loss_scores"):
        loss_attack.loss_scores(unfinished)
    with pytest.raises(LabCheckError, match="not done yet"):
        loss_attack.matches_fedaudit(todo("auc"), {"attacks": {"loss": {"auc": 0.6}}})


def test_loss_check_accepts_the_right_score_and_explains_wrong_ones():
    from fedaudit.labs.checks import loss_attack

    loss_attack.loss_scores(lambda p, y: np.log(p[np.arange(len(y)), y]))
    with pytest.raises(LabCheckError, match="higher for members"):
        loss_attack.loss_scores(lambda p, y: -np.log(p[np.arange(len(y)), y]))
    with pytest.raises(LabCheckError, match="confidence attack"):
        loss_attack.loss_scores(lambda p, y: p[np.arange(len(y)), y])
    with pytest.raises(LabCheckError, match="raised ZeroDivisionError"):
        loss_attack.loss_scores(lambda p, y: 1 / 0)


def test_roc_check_catches_a_reversed_orientation():
    from sklearn.metrics import roc_auc_score

    from fedaudit.labs.checks import loss_attack

    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 300)
    scores = member + rng.normal(0, 1, 300)
    with pytest.raises(LabCheckError, match="higher means member"):
        loss_attack.roc_summary(lambda s, m: (roc_auc_score(m, -s), 0.0), scores, member)
    with pytest.raises(LabCheckError, match="AUC is 0.41: is your score oriented"):
        loss_attack.matches_fedaudit(0.41, {"attacks": {"loss": {"auc": 0.59}}})


def test_dp_bound_check():
    from fedaudit.labs.checks import defenses

    defenses.dp_bound(lambda e, d, f: 1.0 if math.isinf(e) else min(1.0, math.exp(e) * f + d))
    with pytest.raises(LabCheckError, match="never exceed 1"):
        defenses.dp_bound(lambda e, d, f: math.exp(e) * f + d if not math.isinf(e) else 1.0)


def test_null_auc_sd_matches_the_exact_small_case():
    # one member, one non-member: under the null the AUC is 0 or 1 with probability 1/2
    assert null_auc_sd(1, 1) == pytest.approx(0.5, rel=1e-15)
    # two and two: the 4!/(2!2!) = 6 orderings give U = 0,1,2,2,3,4: var(U) = 10/6,
    # var(AUC) = var(U) / 16 = 5/48
    assert null_auc_sd(2, 2) == pytest.approx(math.sqrt(5 / 48), rel=1e-15)


# ---- grading ---------------------------------------------------------------------------------

def _key(path: Path, member: np.ndarray) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "member", "sample_id", "client"])
        for i, m in enumerate(member):
            w.writerow([i, int(m), 1000 + i, 0 if m else -1])
    return path


@pytest.fixture()
def key(tmp_path):
    member = np.r_[np.ones(300, int), np.zeros(300, int)]
    np.random.default_rng(1).shuffle(member)
    return _key(tmp_path / "key.csv", member), member


def test_grading_the_truth_gives_tpr_one(key, tmp_path):
    path, member = key
    g = grade(write_submission(tmp_path / "truth.csv", np.arange(len(member)), member), path)
    assert g.tpr_at_1pct_fpr == 1.0 and g.auc == 1.0
    assert (g.n_members, g.n_nonmembers) == (300, 300)
    assert g.csv_line() == "truth,1.0000,1.0000,1.0000,300,300"


def test_grading_random_scores_gives_auc_near_one_half(key, tmp_path):
    path, member = key
    rng = np.random.default_rng(2)
    g = grade(write_submission(tmp_path / "random.csv", np.arange(len(member)),
                               rng.random(len(member))), path)
    # scores independent of membership: AUC ~ N(1/2, sd^2) with sd from Mann-Whitney's null
    # variance (0.0167 here); 4 sd is exceeded with probability 6e-5 for any seed
    assert abs(g.auc - 0.5) <= 4 * null_auc_sd(300, 300)


def test_grading_reads_ids_in_any_order(key, tmp_path):
    path, member = key
    order = np.random.default_rng(3).permutation(len(member))
    g = grade(write_submission(tmp_path / "shuffled.csv", order, member[order]), path)
    assert g.auc == 1.0


def _cli(*args, cwd=None):
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0")
    return subprocess.run([*FEDAUDIT, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_cli_grade_prints_a_leaderboard_line(key, tmp_path):
    path, member = key
    sub = write_submission(tmp_path / "alice.csv", np.arange(len(member)), member)
    out = _cli("lab", "grade", str(sub), "--key", str(path), "--header")
    assert out.returncode == 0, out.stderr
    header, line = out.stdout.strip().splitlines()
    assert header == "submission,tpr_at_1pct_fpr,auc,tpr_at_0p1pct_fpr,n_members,n_nonmembers"
    assert line == "alice,1.0000,1.0000,1.0000,300,300"


BAD_SUBMISSIONS = {
    "missing column": ("id,value\n0,1\n", "missing score"),
    "not a number": ("id,score\n0,high\n", "line 2: score must be a number, got 'high'"),
    "nan": ("id,score\n0,nan\n", "line 2: score must be finite"),
    "bad id": ("id,score\nzero,1\n", "line 2: id must be an integer"),
    "duplicate": ("id,score\n0,1\n0,2\n", "id 0 appears 2 times"),
    "unknown id": ("id,score\n0,1\n999,1\n", "not candidates of this challenge (first 999)"),
    "missing ids": ("id,score\n0,1\n", "candidate id(s) have no score (first 1)"),
    "empty": ("id,score\n", "has no rows"),
    "no header": ("", "missing id, score"),
}


@pytest.mark.parametrize("case", sorted(BAD_SUBMISSIONS))
def test_cli_grade_rejects_bad_submissions(key, tmp_path, case):
    path, _ = key
    text, message = BAD_SUBMISSIONS[case]
    sub = tmp_path / "bad.csv"
    sub.write_text(text)
    with pytest.raises(SubmissionError, match=None):
        grade(sub, path)
    out = _cli("lab", "grade", str(sub), "--key", str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("fedaudit: error: ") and message in err, err


def test_cli_grade_missing_files(key, tmp_path):
    path, _ = key
    out = _cli("lab", "grade", str(tmp_path / "nope.csv"), "--key", str(path))
    assert out.returncode == 2 and "no such submission file" in out.stderr
    sub = tmp_path / "s.csv"
    sub.write_text("id,score\n0,1\n")
    out = _cli("lab", "grade", str(sub), "--key", str(tmp_path / "nokey.csv"))
    assert out.returncode == 2 and "no such key file" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_challenge_rejects_a_negative_seed(tmp_path):
    out = _cli("lab", "challenge", "--seed", "-1", "--out", str(tmp_path))
    assert out.returncode == 2 and "seed must be a non-negative integer" in out.stderr
    assert not any(tmp_path.iterdir())


# ---- the notebooks and the challenge, executed (markers: labs, e2e) -------------------------

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


@pytest.fixture(scope="module")
def challenge(lab_dir):
    out = _cli("lab", "challenge", "--seed", str(CHALLENGE_SEED), "--out", str(lab_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    root = Path(out.stdout.strip().splitlines()[-1])
    assert root == lab_dir / f"challenge-{CHALLENGE_SEED}"
    return root


@pytest.mark.labs
@pytest.mark.e2e  # Flower + Ray runs: make test's second pass, with two threads
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
    out = _cli("lab", "grade", str(truth), "--key", str(challenge / "key.csv"))
    assert out.returncode == 0, out.stderr
    name, tpr1, auc, *_ = out.stdout.strip().split(",")
    assert (name, float(tpr1), float(auc)) == ("truth", 1.0, 1.0)
    rnd = np.random.default_rng(0).random(len(ids))
    g = grade(write_submission(tmp_path / "random.csv", ids, rnd), challenge / "key.csv")
    assert abs(g.auc - 0.5) <= 4 * null_auc_sd(g.n_members, g.n_nonmembers)
    # a second challenge with the same seed and folder never replaces the key
    again = _cli("lab", "challenge", "--seed", str(CHALLENGE_SEED), "--out",
                 str(challenge.parent))
    assert again.returncode == 2 and "already exists" in again.stderr


def _execute(path: Path, cwd: Path):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        return nb, exc
    return nb, None


def _error_cell(nb):
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return i, out
    return None, None


LAB_SOURCES = sorted(p.stem for p in (LABS / "src").glob("lab*.py"))


@pytest.mark.labs
@pytest.mark.e2e  # Flower + Ray runs: make test's second pass, with two threads
@pytest.mark.parametrize("lab", LAB_SOURCES)
def test_solution_notebook_passes_its_checks(lab, lab_dir, challenge, notebook_cwd):
    nb, error = _execute(LABS / "solutions" / f"{lab}.ipynb", notebook_cwd)
    assert error is None, str(error)[-3000:]
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        assert text.startswith("ok  Task "), (lab, cell.source, text)
    assert not any(notebook_cwd.glob("lab-runs")), "runs must go to $FEDAUDIT_LAB_DIR"


@pytest.mark.labs
@pytest.mark.e2e  # Flower + Ray runs: make test's second pass, with two threads
@pytest.mark.parametrize("lab", LAB_SOURCES)
def test_student_notebook_fails_at_its_first_check(lab, lab_dir, challenge, notebook_cwd):
    nb, error = _execute(LABS / f"{lab}.ipynb", notebook_cwd)
    assert error is not None, f"{lab}: the unfinished notebook ran to the end"
    index, out = _error_cell(nb)
    first_check = next(i for i, c in enumerate(nb.cells)
                       if "check" in c.metadata.get("tags", []))
    assert index == first_check, (lab, nb.cells[index].source if index is not None else None)
    assert out["ename"] == "LabCheckError"
    assert "is not done yet: the cell above still has a TODO" in out["evalue"], out["evalue"]


def test_todo_is_found_inside_containers():
    from fedaudit.labs import is_todo, require

    assert is_todo({"a": (1.0, todo("gap"))})
    assert not is_todo({"a": (1.0, 2.0)})
    with pytest.raises(LabCheckError, match=r"Task 3\.3 is not done yet.*\(gap\)"):
        require({"a": (1.0, todo("gap"))}, "3.3")


def test_lab_cache_key_ignores_the_folder_the_data_is_read_from(tmp_path, monkeypatch):
    from fedaudit.api import validate
    from fedaudit.labs.runs import cache_key

    keys = []
    for name in ("a", "b"):
        (tmp_path / name / "data").mkdir(parents=True)
        (tmp_path / name / "data" / "x.bin").write_bytes(b"same bytes")
        monkeypatch.chdir(tmp_path / name)
        keys.append(cache_key(validate("quickstart")))
    assert keys[0] == keys[1]
    (tmp_path / "b" / "data" / "x.bin").write_bytes(b"other bytes")  # other data: retrain
    assert cache_key(validate("quickstart")) != keys[0]


@pytest.mark.labs
@pytest.mark.e2e
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
