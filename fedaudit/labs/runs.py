"""Runs for the classroom labs: cached by scenario, and opened as an attacker sees them.

:func:`lab_run` is :func:`fedaudit.run` with a cache: the same resolved scenario (same
seed, same overrides, the same data wherever it is read from: :func:`cache_key`) is
trained once and re-opened afterwards, so re-executing a notebook,
or several labs that share a federation, cost one training (runs are deterministic, so the
cached run holds exactly the numbers a fresh one would).  Runs go under ``lab_dir``:
``$FEDAUDIT_LAB_DIR``, else ``./lab-runs``.

:func:`load_target` opens a finished run the way fedaudit's own attacks saw it: an
:class:`~attacks.Oracle` on the final global model and the pooled audit set (every client's
members and their class-matched holdout non-members, each distinct sample once), so a
student's attack can be compared number for number with ``results.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedaudit.api import Run, ScenarioLike, load_run, run, validate
from fedaudit.scenario import Scenario
from fedaudit.version import __version__

__all__ = ["LAB_DIR_ENV", "SECRETS_OVERRIDES", "TARGET", "TEXT_ENV", "AttackerView",
           "LanguageModel", "client_oracle", "lab_dir", "lab_run", "language_model",
           "load_target", "run_scenario", "scenario_file", "secrets_target", "text_path"]

LAB_DIR_ENV = "FEDAUDIT_LAB_DIR"

#: the federation labs 1-5 and 7 share, as ``lab_run(*TARGET)``: membership-signal
#: (overfit) over 4 rounds with 8 Dirichlet clients of different sizes, five mislabeled
#: canaries planted in client 0, client-side GNQ, LOSS, Res-MIA and FedMIA against the
#: global model and the models the server received in every round (trained once, shared
#: by the cache)
TARGET: tuple[str, tuple[str, ...]] = (
    "membership-signal",
    ("federation.rounds=4", "federation.num_clients=8", "data.partitioner=dirichlet",
     "data.alpha=1.0", "canaries.count=5", "canaries.clients=[0]", "audit.gnq.client=true",
     "attack.methods=['loss','resmia','fedmia']", "attack.targets=['global','clients']",
     "attack.rounds='all'"),
)


#: lab 9's federation, as ``lab_run(*secrets_target())``: the ``shakespeare-secrets``
#: scenario (a causal transformer on per-speaker clients of a play, two secrets at each of
#: repeats 1, 4 and 16 in clients 0, 1 and 2, 20 never-inserted references) on 6 clients
#: over 4 rounds of 2 local epochs (about a minute on 2 CPU cores); server-side GNQ off
#: (the lab reads the clients' GNQ only)
SECRETS_OVERRIDES: tuple[str, ...] = (
    "federation.num_clients=6", "federation.rounds=4", "train.local_epochs=2",
    "canaries.references=20", "audit.gnq.server=false")

#: the environment variable naming lab 9's text file (any UTF-8 play of ``NAME:`` speeches)
TEXT_ENV = "FEDAUDIT_LAB_TEXT"
_TEXT_NAME = "tinyshakespeare.txt"


def _repo() -> Path | None:
    """The source checkout the package runs from (the folder holding ``fedaudit/`` and
    ``pyproject.toml``), or None when fedaudit is installed (a wheel, ``pip install .``):
    the notebooks live in the checkout's ``labs/``, but these helpers need none of it."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def scenario_file(name: str) -> Path:
    """The scenario ``name``: the checkout's ``scenarios/NAME.toml`` (a source checkout,
    where the labs live), else the bundled one (an installed package)."""
    from fedaudit.config import bundled_scenarios

    checkout = _repo()
    if checkout is not None and (checkout / "scenarios" / f"{name}.toml").is_file():
        return checkout / "scenarios" / f"{name}.toml"
    bundled = bundled_scenarios()
    if name in bundled:
        return bundled[name]
    raise FileNotFoundError(f"no scenario {name!r}: not bundled"
                            + (f", nor in {checkout / 'scenarios'}" if checkout else ""))


def text_path(path: str | os.PathLike | None = None) -> Path:
    """Lab 9's play: ``path`` when given, else ``$FEDAUDIT_LAB_TEXT``, else the first
    ``tinyshakespeare.txt`` found in ``./``, ``./data/`` and, from a source checkout, the
    checkout's ``data/`` or ``../shared/data/`` beside it.  FileNotFoundError (saying where
    it looked and where the file comes from) when there is none."""
    given = path or os.environ.get(TEXT_ENV)
    if given:
        p = Path(given).expanduser().resolve()
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such text file")
        return p
    places = [Path.cwd(), Path.cwd() / "data"]
    checkout = _repo()
    if checkout is not None:
        places += [checkout / "data", checkout.parent / "shared" / "data"]
    for folder in places:
        if (folder / _TEXT_NAME).is_file():
            return (folder / _TEXT_NAME).resolve()
    raise FileNotFoundError(
        f"no {_TEXT_NAME} in " + ", ".join(str(f) for f in places) + f"; set ${TEXT_ENV} to "
        "a UTF-8 play of 'NAME:' speeches, e.g. the tiny-shakespeare corpus of "
        "github.com/karpathy/char-rnn (data/tinyshakespeare/input.txt)")


def secrets_target(text: str | os.PathLike | None = None) -> tuple[str, tuple[str, ...]]:
    """Lab 9's federation as ``lab_run(*secrets_target(text))``: the shakespeare-secrets
    scenario file, :data:`SECRETS_OVERRIDES` and the play :func:`text_path` finds."""
    return (str(scenario_file("shakespeare-secrets")),
            SECRETS_OVERRIDES + (f"data.path={json.dumps(str(text_path(text)))}",))


def lab_dir() -> Path:
    """Where lab runs go: ``$FEDAUDIT_LAB_DIR``, else ``./lab-runs``."""
    return Path(os.environ.get(LAB_DIR_ENV) or "lab-runs").resolve()


def _digest(path: str) -> str:
    """What a scenario path holds, not where: a file's bytes, a folder's relative file
    names and bytes (sorted), or "absent"."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_file():
        h.update(p.read_bytes())
    elif p.is_dir():
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            h.update(f.relative_to(p).as_posix().encode("utf-8") + b"\0")
            h.update(f.read_bytes())
    else:
        return "absent"
    return h.hexdigest()


def cache_key(scenario: Scenario) -> str:
    """What changes the federation: the resolved scenario with each data path
    (``data.path``, ``data.data_dir``) replaced by the digest of what it holds, so the same
    notebook opened from two folders, or with a copy of the data elsewhere, trains once."""
    from fedaudit.config import PATH_KEYS

    sections = scenario.sections()
    for table, key in PATH_KEYS:
        if sections[table].get(key):
            sections[table][key] = _digest(sections[table][key])
    text = json.dumps(sections, sort_keys=True, default=str) + __version__
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def lab_run(scenario: ScenarioLike, overrides: list[str] | tuple[str, ...] = (), *,
            progress: bool = False) -> Run:
    """:func:`fedaudit.run` once per resolved scenario: a finished run of the same scenario
    under :func:`lab_dir` is re-opened instead of trained again."""
    resolved = validate(scenario, list(overrides))
    folder = lab_dir() / f"{resolved.name}-{cache_key(resolved)}"
    finished = sorted(p.parent for p in folder.glob("*/results.json"))
    if finished:
        return load_run(finished[-1])
    return run(resolved, out=folder, progress=progress)


def run_scenario(r: Run) -> Scenario:
    """The resolved scenario a run directory holds (its scenario.toml)."""
    from fedaudit.config import load_scenario
    from fedaudit.rundir.layout import SCENARIO_NAME

    return load_scenario(str(r.dir / SCENARIO_NAME))


@dataclass(frozen=True)
class AttackerView:
    """A trained model behind an oracle, and the samples fedaudit attacked.

    ``target`` is the audit's own :class:`fedaudit.audit.Target` (what the oracle queries:
    its name, kind and round, as in scores.npz); ``x, y, sample_id, member, client`` are
    parallel arrays over the pooled audit set (``member`` 1 for a training sample,
    ``client`` its owner, -1 for a non-member); ``data`` is the whole federated dataset
    (``data.clients[c]``: client c's sample ids, ``data.test``: the test ids)."""

    oracle: object
    x: np.ndarray
    y: np.ndarray
    sample_id: np.ndarray
    member: np.ndarray
    client: np.ndarray
    data: object
    scenario: Scenario
    target: object = None



def _context(r: Run):
    """The audit's context of a finished run: its scenario, data and trajectory."""
    from fedaudit.audit import AuditContext, Trajectory
    from fedaudit.data import build_federated_data
    from fedaudit.rundir import load_checkpoint
    from fedaudit.rundir.layout import checkpoint_path
    from fedaudit.training import pick_device

    scenario = run_scenario(r)
    rounds = len(r.results["rounds"])
    if rounds < 1:
        raise ValueError(f"{r.dir} finished no round: there is no model to attack")
    paths = tuple(checkpoint_path(r.dir, k) for k in range(1, rounds + 1))
    return AuditContext(scenario, build_federated_data(scenario), pick_device("cpu"), r.dir,
                        r.results, Trajectory(paths, load_checkpoint(paths[-1])))


def load_target(r: Run, round_: int | None = None) -> AttackerView:
    """The attacker's view of a finished run: an oracle on the global model after
    ``round_`` (default the last round: the ``global`` target) and the pooled audit set of
    the run's attacks."""
    from fedaudit.audit import Target as AuditTarget
    from fedaudit.audit.targets.base import model_methods

    ctx = _context(r)
    rounds = len(ctx.trajectory.checkpoints)
    round_ = rounds if round_ is None else round_
    if not 1 <= round_ <= rounds:
        raise ValueError(f"round_ must be between 1 and {rounds}, got {round_}")
    target = (AuditTarget("global", "global", lambda: ctx.trajectory.final,
                          model_methods(ctx.scenario)) if round_ == rounds else
              AuditTarget(f"round:{round_}", "rounds", lambda: ctx.trajectory.state(round_),
                          model_methods(ctx.scenario), per_client=False, round=round_))
    ids, member = ctx.pooled.ids, ctx.pooled.member
    owner = ctx.data.client_of()[ids]
    return AttackerView(ctx.oracle(target.load()), ctx.data.x[ids], ctx.data.y[ids], ids,
                        member, np.where(member == 1, owner, -1), ctx.data, ctx.scenario,
                        target)


def client_oracle(r: Run, client: int, round_: int | None = None):
    """An oracle on the model client ``client`` sent to the server in ``round_`` (default:
    the last round the run kept; needs ``attack.targets`` with ``clients``): the
    ``clients`` target of that client and round."""
    from fedaudit.audit import Target as AuditTarget
    from fedaudit.rundir import load_checkpoint
    from fedaudit.rundir.client_models import client_model_rounds
    from fedaudit.rundir.layout import client_model_path

    kept = client_model_rounds(r.dir)
    if not kept:
        raise ValueError(f"{r.dir} kept no client models (run with attack.targets "
                         "including 'clients')")
    round_ = max(kept) if round_ is None else round_
    if client not in kept.get(round_, []):
        raise ValueError(f"no model of client {client} kept for round {round_}; kept: {kept}")
    target = AuditTarget(f"client-model:r{round_}", "clients",
                         lambda: load_checkpoint(client_model_path(r.dir, round_, client)),
                         (), client=client, round=round_)
    return _context(r).oracle(target.load())


@dataclass(frozen=True)
class LanguageModel:
    """A trained character model as the secrets see it.

    ``next_log_probs(contexts)``: token contexts, int64 (B, T), to the natural-log
    probabilities (B, V) of the next token after each (float64); ``vocab[t]`` is token t's
    character; ``secrets`` the run's planted and reference secrets
    (:class:`fedaudit.data.secrets.PlantedSecrets`: ``prefix`` and ``alphabet`` tokens, each
    secret's ``tokens``, ``client`` (-1: a reference) and ``repeats`` (0: a reference));
    ``name`` says which model it is."""

    next_log_probs: object
    vocab: tuple[str, ...]
    secrets: object
    name: str

    def encode(self, text: str) -> np.ndarray:
        index = {ch: i for i, ch in enumerate(self.vocab)}
        return np.array([index[ch] for ch in text], dtype=np.int64)

    def decode(self, tokens) -> str:
        return "".join(self.vocab[int(t)] for t in np.asarray(tokens).ravel())


def language_model(r: Run, client: int | None = None) -> LanguageModel:
    """The released global model of a text run (``client=None``), or client ``client``'s
    model as the server last received it (the secrets stage's server view; needs
    ``attack.targets`` with ``clients``), behind the next-token callable the secrets
    stage ranks candidates with (same batch size, so the same numbers)."""
    from fedaudit.audit.stages.secrets import next_log_probs
    from fedaudit.rundir import load_checkpoint
    from fedaudit.rundir.client_models import client_model_rounds
    from fedaudit.rundir.layout import client_model_path

    ctx = _context(r)
    if ctx.data.text is None:
        raise ValueError(f"{r.dir} is not a run on text data")
    if client is None:
        state, name = ctx.trajectory.final, "global model"
    else:
        kept = [k for k, cl in client_model_rounds(r.dir).items() if client in cl]
        if not kept:
            raise ValueError(f"{r.dir} kept no model of client {client} (run with "
                             "attack.targets including 'clients')")
        state = load_checkpoint(client_model_path(r.dir, max(kept), client))
        name = f"client {client}'s model of round {max(kept)} (the server's view)"
    model = ctx.model()
    model.load_state_dict(state)
    return LanguageModel(next_log_probs(model, ctx.device, ctx.scenario.attack.batch_size),
                         tuple(ctx.data.classes), ctx.data.secrets, name)
