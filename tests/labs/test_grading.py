"""The lab challenge's grading (fedaudit.labs.challenge): a submission graded against the
key, ``fedaudit lab grade`` and its one-line errors, ``fedaudit lab challenge``'s input
checks."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from fedaudit.labs.challenge import SubmissionError, grade, write_submission
from fedaudit.labs.checks.challenge import null_auc_sd

from tests.helpers.labs import fedaudit_cli


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
    # AUC's null sd sqrt(601 / (12 * 300 * 300)) = 0.02359, p95 0.5 + 1.6449 sd = 0.53881;
    # Clopper-Pearson with 300 of 300: low = 0.025 ** (1 / 300) = 0.98778; chance p95 of
    # NHG(600, 300, 4) = 9 / 300
    assert g.csv_line() == ("truth,1.0000,1.0000,1.0000,300,300,0.5388,yes,0.9878,1.0000,"
                            "0.0300,yes")


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


def test_cli_grade_prints_a_leaderboard_line(key, tmp_path):
    path, member = key
    sub = write_submission(tmp_path / "alice.csv", np.arange(len(member)), member)
    out = fedaudit_cli("lab", "grade", str(sub), "--key", str(path), "--header")
    assert out.returncode == 0, out.stderr
    header, line = out.stdout.strip().splitlines()
    assert header == ("submission,tpr_at_1pct_fpr,auc,tpr_at_0p1pct_fpr,n_members,n_nonmembers,"
                      "auc_chance_p95,auc_beats_chance,tpr_ci95_low,tpr_ci95_high,"
                      "tpr_chance_p95,tpr_beats_chance")
    assert line == "alice,1.0000,1.0000,1.0000,300,300,0.5388,yes,0.9878,1.0000,0.0300,yes"
    assert "above chance" in out.stderr and "95% CI 0.988-1.000" in out.stderr


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
    out = fedaudit_cli("lab", "grade", str(sub), "--key", str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("fedaudit: error: ") and message in err, err


def test_cli_grade_missing_files(key, tmp_path):
    path, _ = key
    out = fedaudit_cli("lab", "grade", str(tmp_path / "nope.csv"), "--key", str(path))
    assert out.returncode == 2 and "no such submission file" in out.stderr
    sub = tmp_path / "s.csv"
    sub.write_text("id,score\n0,1\n")
    out = fedaudit_cli("lab", "grade", str(sub), "--key", str(tmp_path / "nokey.csv"))
    assert out.returncode == 2 and "no such key file" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_challenge_rejects_a_negative_seed(tmp_path):
    out = fedaudit_cli("lab", "challenge", "--seed", "-1", "--out", str(tmp_path))
    assert out.returncode == 2 and "seed must be a non-negative integer" in out.stderr
    assert not any(tmp_path.iterdir())


def test_cli_challenge_without_mnist_says_how_to_get_it(tmp_path):
    out = fedaudit_cli("lab", "challenge", "--seed", "1", "--out", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "data.dataset = 'mnist': not found" in err and "--download" in err, err
    assert not any(tmp_path.iterdir())  # nothing written, no half-made challenge


def test_cli_challenge_rejects_unknown_data(tmp_path):
    out = fedaudit_cli("lab", "challenge", "--seed", "1", "--out", str(tmp_path), "--data", "svhn")
    assert out.returncode == 2
    assert "--data 'svhn': allowed: mnist, digits, or a path to an .npz file" in out.stderr
