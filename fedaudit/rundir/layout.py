"""The layout of a run directory, in one place: every file and folder name a run leaves.

``fedaudit run`` leaves one directory per run (docs/guide.md section 4, "What a run leaves")::

    <name>-<YYYYmmdd-HHMMSS>/
        scenario.toml          the resolved scenario (every default filled in)
        rounds.jsonl           one JSON object per finished round
        checkpoints/           round-NNNN.pt (global model), rng-NNNN.json (sampler state);
                               seed-S/ the same for an extra training seed
        gnq/round-NNNN.npz     client-side per-sample GNQ as it arrived (audit.gnq.client)
        gnq_samples.npz        all rounds' client-side GNQ (audit.gnq.client)
        client_models/round-NNNN/client-CCCC.pt
                               the clients' models as the server received them (the
                               ``clients`` attack target)
        scores.npz             every attack score (attack.enabled)
        dp_canaries.npz        the one-run DP audit's canaries (audit.dp.canaries)
        dp_gradient/round-NNNN.npz
                               the clients' updates at their gradient canaries' coordinates,
                               as the server received them (audit.dp.level = "gradient")
        updates/round-NNNN/    the reconstruction stage's cases: start.pt (the global model
                               sent), client-CCCC.pt (each kept client's model as received),
                               clients.npz (client, num_examples)
        reconstructions.npz    every reconstructed sample, its matched true sample and
                               metrics ([reconstruction])
        aggregate-reconstructions.npz
                               the same for the rounds' aggregates (reconstruction.on)
        imprint.npz            the malicious server's read-back: each candidate image, its
                               bin, the true sample it was matched to and its metrics
        results.json           the summary; its presence marks a finished run
        report.html            the report (unless --no-report)
        run.log                Flower's and fedaudit's log

Other modules name these files only through this module.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["aggregate_file", "CHECKPOINTS_DIR", "CLIENT_MODELS_DIR", "DP_CANARIES_NAME", "DP_GRADIENT_DIR",
           "IMPRINT_NAME", "RECONSTRUCTIONS_NAME", "UPDATES_DIR", "update_clients_path", "update_model_path",
           "update_start_path", "updates_round_dir",
           "GNQ_DIR", "GNQ_SAMPLES_NAME", "LOG_NAME", "REPORT_NAME", "RESULTS_NAME",
           "ROUNDS_NAME", "RUN_MARKERS", "SCENARIO_NAME", "SCORES_NAME", "checkpoint_path",
           "checkpoints_dir", "client_model_path", "client_models_round_dir",
           "dp_gradient_round_path", "gnq_round_path", "rng_path", "rounds_path"]

RESULTS_NAME = "results.json"
SCORES_NAME = "scores.npz"
ROUNDS_NAME = "rounds.jsonl"
GNQ_SAMPLES_NAME = "gnq_samples.npz"
GNQ_DIR = "gnq"
SCENARIO_NAME = "scenario.toml"
LOG_NAME = "run.log"
REPORT_NAME = "report.html"
CHECKPOINTS_DIR = "checkpoints"
CLIENT_MODELS_DIR = "client_models"
DP_CANARIES_NAME = "dp_canaries.npz"
DP_GRADIENT_DIR = "dp_gradient"
UPDATES_DIR = "updates"
RECONSTRUCTIONS_NAME = "reconstructions.npz"
IMPRINT_NAME = "imprint.npz"
#: any of these marks a (possibly unfinished) run directory
RUN_MARKERS = (RESULTS_NAME, SCENARIO_NAME, ROUNDS_NAME, LOG_NAME, CHECKPOINTS_DIR)


def checkpoints_dir(run_dir: Path, subdir: str = "") -> Path:
    """The global models' folder (``subdir``: an extra training seed's)."""
    return Path(run_dir) / CHECKPOINTS_DIR / subdir


def checkpoint_path(run_dir: Path, round_: int, subdir: str = "") -> Path:
    """The global model after ``round_``."""
    return checkpoints_dir(run_dir, subdir) / f"round-{round_:04d}.pt"


def rng_path(run_dir: Path, round_: int, subdir: str = "") -> Path:
    """The server's client-sampling RNG state after ``round_`` (what ``--resume`` restores)."""
    return checkpoints_dir(run_dir, subdir) / f"rng-{round_:04d}.json"


def rounds_path(run_dir: Path, subdir: str = "") -> Path:
    """``rounds.jsonl``, or ``rounds-<subdir>.jsonl`` for an extra training seed."""
    return Path(run_dir) / (f"rounds-{subdir}.jsonl" if subdir else ROUNDS_NAME)


def gnq_round_path(run_dir: Path, round_: int, subdir: str = "") -> Path:
    """Client-side per-sample GNQ of ``round_`` as it arrived."""
    return Path(run_dir) / GNQ_DIR / subdir / f"round-{round_:04d}.npz"


def client_models_round_dir(run_dir: Path, round_: int) -> Path:
    return Path(run_dir) / CLIENT_MODELS_DIR / f"round-{round_:04d}"


def client_model_path(run_dir: Path, round_: int, client: int) -> Path:
    """Client ``client``'s model of ``round_`` as the server received it."""
    return client_models_round_dir(run_dir, round_) / f"client-{client:04d}.pt"


def dp_gradient_round_path(run_dir: Path, round_: int) -> Path:
    """The clients' updates of ``round_`` at their gradient canaries' coordinates."""
    return Path(run_dir) / DP_GRADIENT_DIR / f"round-{round_:04d}.npz"


def updates_round_dir(run_dir: Path, round_: int) -> Path:
    """The reconstruction stage's kept cases of ``round_``."""
    return Path(run_dir) / UPDATES_DIR / f"round-{round_:04d}"


def update_start_path(run_dir: Path, round_: int) -> Path:
    """The global model the server sent in ``round_`` (what its clients started from)."""
    return updates_round_dir(run_dir, round_) / "start.pt"


def update_model_path(run_dir: Path, round_: int, client: int) -> Path:
    """Client ``client``'s model of ``round_`` as the server received it (a kept case)."""
    return updates_round_dir(run_dir, round_) / f"client-{client:04d}.pt"


def update_clients_path(run_dir: Path, round_: int) -> Path:
    """The kept clients of ``round_`` and the num_examples each reported."""
    return updates_round_dir(run_dir, round_) / "clients.npz"


def aggregate_file(name: str) -> str:
    """The run-directory file of a family's per-sample arrays on the rounds' aggregates,
    beside ``name``, its file on each update (``aggregate-reconstructions.npz``)."""
    return f"aggregate-{name}"
