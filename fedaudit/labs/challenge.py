"""The capstone challenge: a target federation whose membership the student must infer.

``make_challenge(seed, out)`` trains the ``membership-signal`` federation with scenario
seed ``seed`` and writes::

    OUT/challenge-<seed>/
        student/     what the student gets: model.pt (the global model's state_dict),
                     model.json (architecture), candidates.npz (id, x, y)
        key.csv      the instructor's answer key: id, member (1 = training sample),
                     sample_id, client
        run/         the training run (scenario.toml, checkpoints, results.json)

The candidates are the pooled audit set fedaudit's own attacks use (every client's members
and as many class-matched holdout non-members), shuffled, under anonymous ids 0..n-1, so
neither the order nor the id betrays membership.  ``grade(submission, key)`` scores a CSV
``id,score`` (higher = more likely member) by AUC and TPR at 1% / 0.1% FPR
(:func:`fedaudit.metrics.membership_metrics`).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedaudit.errors import ScenarioError

__all__ = ["CHALLENGE_SCENARIO", "Challenge", "Grade", "SubmissionError", "grade",
           "load_challenge", "make_challenge", "read_key", "read_submission",
           "write_submission"]

#: the federation every challenge trains (overfit, so a good attack beats chance clearly)
CHALLENGE_SCENARIO = "membership-signal"
#: what the challenge switches off: the student attacks, fedaudit does not
CHALLENGE_OVERRIDES = ("attack.enabled=false", "audit.quantization.enabled=false",
                       "audit.gnq.server=false", "audit.gnq.client=false")
STUDENT_DIR, KEY_NAME, RUN_DIR = "student", "key.csv", "run"


class SubmissionError(ScenarioError):
    """A submission or key file that cannot be graded (one line; the CLI exits 2)."""


@dataclass(frozen=True)
class Challenge:
    """What the student gets: an oracle on the target model and the candidates."""

    oracle: object
    id: np.ndarray
    x: np.ndarray
    y: np.ndarray


def make_challenge(seed: int, out: str | os.PathLike = ".", *, progress: bool = False) -> Path:
    """Train the challenge federation for ``seed``; return ``OUT/challenge-<seed>``.
    Refuses a folder that already exists (a key must never be silently replaced)."""
    from fedaudit.api import run, validate
    from fedaudit.labs.runs import load_target
    from fedaudit.rundir import atomic_write_json, checkpoint_path
    from fedaudit.rundir.layout import RESULTS_NAME

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"seed must be a non-negative integer, got {seed!r}")
    root = Path(out).resolve() / f"challenge-{seed}"
    if root.exists():
        raise ScenarioError(f"{root} already exists; remove it or choose another --out")
    scenario = validate(CHALLENGE_SCENARIO,
                        [f"scenario.seed={seed}", "scenario.name=challenge",
                         *CHALLENGE_OVERRIDES])
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        r = run(scenario, out=tmp / "runs", progress=progress)
        target = load_target(r)
        order = np.random.default_rng([seed, 104729]).permutation(len(target.sample_id))
        student = tmp / STUDENT_DIR
        student.mkdir()
        model = target.scenario.model
        _, c, h, _ = target.data.x.shape
        (student / "model.json").write_text(json.dumps(
            {"name": model.name, "width": model.width, "in_channels": int(c),
             "image_size": int(h), "num_classes": int(target.data.num_classes)}, indent=1))
        shutil.copyfile(checkpoint_path(r.dir, len(r.results["rounds"])), student / "model.pt")
        np.savez(student / "candidates.npz", id=np.arange(len(order)),
                 x=target.x[order], y=target.y[order])
        with open(tmp / KEY_NAME, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "member", "sample_id", "client"])
            for i, k in enumerate(order):
                w.writerow([i, int(target.member[k]), int(target.sample_id[k]),
                            int(target.client[k])])
        # results.json names the folder the run was trained in: point it at its final place
        results = dict(r.results, run_dir=str(root / RUN_DIR))
        atomic_write_json(r.dir / RESULTS_NAME, results)
        r.dir.rename(tmp / RUN_DIR)
        (tmp / "runs").rmdir()
        tmp.rename(root)  # the challenge appears complete, or not at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def load_challenge(student_dir: str | os.PathLike) -> Challenge:
    """The student's view of a challenge folder (``.../student``): oracle and candidates."""
    from attacks import Oracle
    from fedaudit.models import build_model
    from fedaudit.rundir import load_checkpoint

    folder = Path(student_dir)
    meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    model = build_model(meta["name"], in_channels=meta["in_channels"],
                        image_size=meta["image_size"], num_classes=meta["num_classes"],
                        width=meta["width"], seed=0)
    model.load_state_dict(load_checkpoint(folder / "model.pt"))
    with np.load(folder / "candidates.npz") as npz:
        return Challenge(Oracle(model), npz["id"], npz["x"], npz["y"])


def write_submission(path: str | os.PathLike, ids, scores) -> Path:
    """Write ``id,score`` rows (the format :func:`grade` reads)."""
    ids, scores = np.asarray(ids), np.asarray(scores, dtype=np.float64)
    if ids.shape != scores.shape or ids.ndim != 1:
        raise ValueError(f"ids and scores must be 1-D of one length, got shapes {ids.shape} "
                         f"and {scores.shape}")
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "score"])
        w.writerows((int(i), repr(float(s))) for i, s in zip(ids, scores))
    return path


def _rows(path: Path, columns: tuple[str, ...], what: str) -> list[dict[str, str]]:
    if not path.is_file():
        raise SubmissionError(f"{path}: no such {what} file")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in columns if c not in header]
            if missing:
                raise SubmissionError(f"{path}: the {what} needs the columns "
                                      f"{', '.join(columns)} in its header line; missing "
                                      f"{', '.join(missing)}")
            reader.fieldnames = header
            return list(reader)
    except UnicodeDecodeError:
        raise SubmissionError(f"{path}: not a UTF-8 text (CSV) file") from None
    except csv.Error as exc:
        raise SubmissionError(f"{path}: not a valid CSV file ({exc})") from None


def _column(path: Path, rows: list[dict], name: str, kind: type) -> np.ndarray:
    out = []
    for line, row in enumerate(rows, start=2):
        text = (row.get(name) or "").strip()
        try:
            value = kind(text)
        except ValueError:
            raise SubmissionError(f"{path}: line {line}: {name} must be "
                                  f"{'an integer' if kind is int else 'a number'}, "
                                  f"got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise SubmissionError(f"{path}: line {line}: score must be finite, got {text!r}")
        out.append(value)
    return np.asarray(out, dtype=np.int64 if kind is int else np.float64)


def read_key(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """The key's ``(id, member)`` arrays."""
    path = Path(path)
    rows = _rows(path, ("id", "member"), "key")
    ids, member = _column(path, rows, "id", int), _column(path, rows, "member", int)
    if not len(ids) or not np.isin(member, (0, 1)).all() or len(np.unique(member)) < 2:
        raise SubmissionError(f"{path}: a key needs rows with member 0 and member 1 only")
    return ids, member


def read_submission(path: str | os.PathLike, key_ids: np.ndarray) -> np.ndarray:
    """The submission's scores in the order of ``key_ids``; every key id exactly once."""
    path = Path(path)
    rows = _rows(path, ("id", "score"), "submission")
    if not rows:
        raise SubmissionError(f"{path}: the submission has no rows; expected one per "
                              f"candidate id ({len(key_ids)})")
    ids, scores = _column(path, rows, "id", int), _column(path, rows, "score", float)
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise SubmissionError(f"{path}: id {int(uniq[counts > 1][0])} appears "
                              f"{int(counts[counts > 1][0])} times; give each id once")
    unknown = np.setdiff1d(ids, key_ids)
    if unknown.size:
        raise SubmissionError(f"{path}: {unknown.size} id(s) are not candidates of this "
                              f"challenge (first {int(unknown[0])}); ids are "
                              f"{int(key_ids.min())}..{int(key_ids.max())}")
    missing = np.setdiff1d(key_ids, ids)
    if missing.size:
        raise SubmissionError(f"{path}: {missing.size} candidate id(s) have no score "
                              f"(first {int(missing[0])}); score every candidate")
    order = {int(i): k for k, i in enumerate(ids)}
    return scores[[order[int(i)] for i in key_ids]]


@dataclass(frozen=True)
class Grade:
    """A submission's score; ``csv_line`` is one leaderboard row (:data:`CSV_HEADER`)."""

    name: str
    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_0p1pct_fpr: float
    n_members: int
    n_nonmembers: int

    CSV_HEADER = "submission,tpr_at_1pct_fpr,auc,tpr_at_0p1pct_fpr,n_members,n_nonmembers"

    def csv_line(self) -> str:
        return (f"{self.name},{self.tpr_at_1pct_fpr:.4f},{self.auc:.4f},"
                f"{self.tpr_at_0p1pct_fpr:.4f},{self.n_members},{self.n_nonmembers}")


def grade(submission: str | os.PathLike, key: str | os.PathLike) -> Grade:
    """Score a submission against a key (metrics of :func:`fedaudit.metrics.membership_metrics`)."""
    from fedaudit.metrics import membership_metrics

    ids, member = read_key(key)
    scores = read_submission(submission, ids)
    m = membership_metrics(scores, member)
    name = Path(submission).stem.replace(",", "_")
    return Grade(name, m["auc"], m["tpr_at_1pct_fpr"], m["tpr_at_0p1pct_fpr"],
                 m["n_members"], m["n_nonmembers"])
