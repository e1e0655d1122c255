"""The capstone challenge: a target federation whose membership the student must infer.

``make_challenge(seed, out)`` trains the overfit ``membership-signal`` federation on MNIST
(or the bundled digits, an offline fallback) with scenario seed ``seed`` and writes::

    OUT/challenge-<seed>/
        student/        what the student gets: model.pt (the global model's state_dict),
                        model.json (architecture), candidates.npz (id, x, y)
        key.csv         the instructor's answer key: id, member (1 = training sample),
                        sample_id, client
        challenge.json  the instructor's calibration: data, sizes, chance level, and the
                        LOSS baseline's leaderboard line
        run/            the training run (scenario.toml, checkpoints, results.json)

The candidates are every training sample of every client (members) and the whole holdout
split (non-members; the splits are stratified, so both have the same label mix): on MNIST
1,000 members and 2,500 non-members, so TPR at 1% FPR rests on 25 false positives.  They
are shuffled under anonymous ids 0..n-1, so neither the order nor the id betrays
membership.  ``grade(submission, key)`` scores a CSV ``id,score`` (higher = more likely
member) into a :class:`~fedaudit.labs.leaderboard.LeaderboardLine`: AUC with its chance
level, TPR at 1% FPR with its 95% interval and the random submissions' 95th percentile.

The leaderboard ranks by AUC (:mod:`fedaudit.labs.leaderboard` says why: on this
federation LOSS is at chance at 1% FPR).  A seed on which the LOSS attack's AUC does not
beat the random submissions' 95th percentile cannot rank a leaderboard (noise would tie
or beat the attack): ``make_challenge`` refuses it unless ``allow_weak=True``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from fedaudit.errors import ScenarioError
from fedaudit.labs.leaderboard import LeaderboardLine, leaderboard_line

__all__ = ["CHALLENGE_DATA", "CHALLENGE_SCENARIO", "Challenge", "Grade", "SubmissionError",
           "WeakChallengeError", "grade", "load_challenge", "make_challenge", "read_key",
           "read_submission", "write_submission"]

#: the federation every challenge trains (overfit, so a good attack beats chance clearly)
CHALLENGE_SCENARIO = "membership-signal"
#: what the challenge switches off: the student attacks, fedaudit does not
CHALLENGE_OVERRIDES = ("attack.enabled=false", "audit.quantization.enabled=false",
                       "audit.gnq.server=false", "audit.gnq.client=false")
#: per data choice, the split: MNIST (4,000 of its images: 1,000 members over 10 clients,
#: 2,500 non-members, 500 test) or membership-signal's own 1,000 digits (250 members over
#: 5 clients, 500 non-members: the offline fallback; with all 1,797 digits the federation
#: generalises and LOSS's AUC falls to 0.51-0.55)
_MNIST_SPLIT = ("data.max_samples=4000", "data.holdout_fraction=0.625",
                "data.test_fraction=0.125", "federation.num_clients=10")
CHALLENGE_DATA = {
    "mnist": ("data.dataset='mnist'", *_MNIST_SPLIT),
    "digits": ("data.dataset='digits'",),
}
STUDENT_DIR, KEY_NAME, RUN_DIR, INFO_NAME = "student", "key.csv", "run", "challenge.json"
#: fewer non-members than this and TPR at 1% FPR rests on under 20 false positives
MIN_NONMEMBERS = 2000


class SubmissionError(ScenarioError):
    """A submission or key file that cannot be graded (one line; the CLI exits 2)."""


class WeakChallengeError(ScenarioError):
    """A seed whose LOSS baseline does not beat random submissions at TPR@1%FPR."""


#: the name the grader's result had before it carried chance levels
Grade = LeaderboardLine


@dataclass(frozen=True)
class Challenge:
    """What the student gets: an oracle on the target model and the candidates."""

    oracle: object
    id: np.ndarray
    x: np.ndarray
    y: np.ndarray


def challenge_overrides(data: str, data_dir: str | os.PathLike = "data",
                        download: bool = False) -> tuple[str, ...]:
    """The data overrides of a challenge on ``data``: ``mnist`` (torchvision's, read from
    ``data_dir``, downloaded there with ``download``), ``digits``, or a path to an .npz
    holding MNIST in the npz dataset's format (x, y)."""
    if data == "mnist":
        where = json.dumps(str(Path(data_dir).expanduser().resolve()))
        return (*CHALLENGE_DATA["mnist"], f"data.data_dir={where}",
                f"data.download={'true' if download else 'false'}")
    if data == "digits":
        return CHALLENGE_DATA["digits"]
    if data.endswith(".npz"):
        path = json.dumps(str(Path(data).expanduser().resolve()))
        return ("data.dataset='npz'", f"data.path={path}", *_MNIST_SPLIT)
    raise ScenarioError(f"--data {data!r}: allowed: mnist, digits, or a path to an .npz file")


def _candidates(r, seed: int):
    """The oracle on the run's final global model and the candidates: members (every
    client's samples) then non-members (the holdout split), with each member's client."""
    from fedaudit.labs.runs import _context

    ctx = _context(r)
    data = ctx.data
    ids = np.concatenate([data.train, data.holdout])
    member = np.r_[np.ones(len(data.train), np.int8), np.zeros(len(data.holdout), np.int8)]
    client = np.where(member == 1, data.client_of()[ids], -1)
    order = np.random.default_rng([seed, 104729]).permutation(len(ids))
    return ctx, ids[order], member[order], client[order]


def require_beats_chance(seed: int, baseline: LeaderboardLine) -> None:
    """:class:`WeakChallengeError` when the LOSS baseline does not beat random submissions
    at the leaderboard's rank, the AUC (a leaderboard on that seed would rank noise)."""
    if not baseline.beats_chance:
        raise WeakChallengeError(
            f"seed {seed}: the LOSS attack's AUC {baseline.auc:.4f} is not above random "
            f"submissions' 95th percentile ({baseline.auc_chance_p95:.4f}), so its "
            "leaderboard would rank noise; choose another --seed (or --allow-weak to "
            "keep it)")


def make_challenge(seed: int, out: str | os.PathLike = ".", *, data: str = "mnist",
                   data_dir: str | os.PathLike = "data", download: bool = False,
                   allow_weak: bool = False, progress: bool = False,
                   overrides: tuple[str, ...] = ()) -> Path:
    """Train the challenge federation for ``seed``; return ``OUT/challenge-<seed>``.
    ``overrides`` (``section.key=value``, applied last) make a variant of the recipe.
    Refuses a folder that already exists (a key must never be silently replaced), and a
    seed whose LOSS baseline does not beat random submissions in AUC
    (:class:`WeakChallengeError`) unless ``allow_weak``."""
    from attacks.membership.baselines import loss_scores
    from fedaudit.api import run, validate
    from fedaudit.rundir import atomic_write_json, checkpoint_path
    from fedaudit.rundir.layout import RESULTS_NAME

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"seed must be a non-negative integer, got {seed!r}")
    data_overrides = challenge_overrides(str(data), data_dir, download)
    root = Path(out).resolve() / f"challenge-{seed}"
    if root.exists():
        raise ScenarioError(f"{root} already exists; remove it or choose another --out")
    scenario = validate(CHALLENGE_SCENARIO,
                        [f"scenario.seed={seed}", "scenario.name=challenge",
                         *CHALLENGE_OVERRIDES, *data_overrides, *overrides])
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        r = run(scenario, out=tmp / "runs", progress=progress)
        ctx, ids, member, client = _candidates(r, seed)
        x, y = ctx.data.x[ids], ctx.data.y[ids]
        proba = ctx.oracle(ctx.trajectory.final).predict_proba(x)
        baseline = leaderboard_line("loss-baseline", loss_scores(proba, y), member)
        if not allow_weak:
            require_beats_chance(seed, baseline)
        student = tmp / STUDENT_DIR
        student.mkdir()
        model = scenario.model
        _, c, h, _ = ctx.data.x.shape
        (student / "model.json").write_text(json.dumps(
            {"name": model.name, "width": model.width, "in_channels": int(c),
             "image_size": int(h), "num_classes": int(ctx.data.num_classes)}, indent=1))
        shutil.copyfile(checkpoint_path(r.dir, len(r.results["rounds"])), student / "model.pt")
        np.savez(student / "candidates.npz", id=np.arange(len(ids)), x=x, y=y)
        with open(tmp / KEY_NAME, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "member", "sample_id", "client"])
            for i in range(len(ids)):
                w.writerow([i, int(member[i]), int(ids[i]), int(client[i])])
        atomic_write_json(tmp / INFO_NAME, {
            "seed": seed, "data": ctx.data.name, "n_members": baseline.n_members,
            "n_nonmembers": baseline.n_nonmembers,
            "chance": asdict(baseline.chance), "loss_baseline": baseline.csv_line(),
            "loss_baseline_summary": baseline.summary(), "weak": not baseline.beats_chance,
            "header": LeaderboardLine.CSV_HEADER})
        # results.json names the folder the run was trained in: point it at its final place
        results = dict(r.results, run_dir=str(root / RUN_DIR))
        atomic_write_json(r.dir / RESULTS_NAME, results)
        r.dir.rename(tmp / RUN_DIR)
        (tmp / "runs").rmdir()
        tmp.rename(root)  # the challenge appears complete, or not at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def challenge_info(root: str | os.PathLike) -> dict:
    """The instructor's ``challenge.json`` of a challenge folder."""
    return json.loads((Path(root) / INFO_NAME).read_text(encoding="utf-8"))


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


def grade(submission: str | os.PathLike, key: str | os.PathLike) -> LeaderboardLine:
    """Score a submission against a key: its leaderboard line beside chance
    (:func:`fedaudit.labs.leaderboard.leaderboard_line`)."""
    ids, member = read_key(key)
    scores = read_submission(submission, ids)
    return leaderboard_line(Path(submission).stem.replace(",", "_"), scores, member)
