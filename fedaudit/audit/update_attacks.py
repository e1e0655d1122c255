"""The attacks on updates, one job per kept (client, round) case: what the server holds
(:class:`attacks.update_case.UpdateCase`, built from the ``client-updates`` probe's files and
the scenario's training recipe) in, the label-leakage guesses and the reconstructions out,
scored against the client's true samples of the round -- the audit's ground truth, which
no attack sees.

A job (:class:`UpdateJob`) is a plain, picklable value and :func:`run_update_job` a plain
function of it, so a runner (:data:`UpdateJobRunner`) may ship jobs to other processes: the
run's Ray actors through its Flower grid
(:func:`fedaudit.simulation.update_attack_jobs.update_job_runner`), or this process
(:func:`run_in_process`).  Each job runs with one torch thread and its own seed, so its
result does not depend on where or in which order it ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.scenario import Scenario

__all__ = ["CaseResult", "UpdateJob", "UpdateJobRunner", "local_training", "run_in_process",
           "run_update_job"]


def local_training(scenario: Scenario, num_examples: int) -> LocalTraining:
    """What the server knows of a client's local training: the scenario's ``[train]``
    recipe and the client's reported ``num_examples``."""
    t = scenario.train
    return LocalTraining(lr=t.lr, momentum=t.momentum if t.optimizer == "sgd" else 0.0,
                         weight_decay=t.weight_decay, optimizer=t.optimizer,
                         local_epochs=t.local_epochs, batch_size=t.batch_size,
                         num_examples=num_examples)


@dataclass(frozen=True)
class UpdateJob:
    """One (client, round) case and what to run on it."""

    scenario: Scenario
    client: int
    round: int
    num_examples: int
    input_shape: tuple[int, ...]
    num_classes: int
    start: dict[str, torch.Tensor]
    received: dict[str, torch.Tensor]
    #: label-leakage attacks to run, in order (the first one's guess feeds the
    #: reconstructions when ``labels_from == "guess"``)
    label_methods: tuple[str, ...]
    #: reconstruction attacks to run
    methods: tuple[str, ...]
    #: "guess" (the first label method's) or "given" (the client's true labels: an upper bound)
    labels_from: str
    #: the true labels of the client's samples (used only when ``labels_from == "given"``)
    true_labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    budget: Any = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    seed: int = 0


@dataclass(frozen=True)
class CaseResult:
    """What one job produced: each label method's guessed counts (and its info), each
    reconstruction (``attacks.reconstruction.Reconstruction``) and the seconds spent."""

    client: int
    round: int
    guesses: dict[str, Any]
    reconstructions: dict[str, Any]
    seconds: dict[str, float]


def _case(job: UpdateJob) -> UpdateCase:
    from fedaudit.models.registry import image_model
    from fedaudit.training.losses import batch_loss

    model = image_model(job.scenario.model, job.input_shape, job.num_classes,
                        seed=job.scenario.seed)  # weights replaced by start below
    model.load_state_dict(job.start)
    update = {k: job.received[k].double() - job.start[k].double() for k in job.start}
    return UpdateCase(model=model, start=job.start, update=update,
                      training=local_training(job.scenario, job.num_examples),
                      input_shape=job.input_shape, num_classes=job.num_classes,
                      box=(0.0, 1.0), loss=batch_loss)


def _label_array(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), np.asarray(counts, dtype=np.int64))


def run_update_job(job: UpdateJob) -> CaseResult:
    """Every attack of ``job`` on its case, with one torch thread (the result does not
    depend on the runner)."""
    from attacks.label_leakage import LABEL_ATTACKS
    from attacks.reconstruction import RECONSTRUCTIONS

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        case = _case(job)
        guesses, recs, seconds = {}, {}, {}
        for name in job.label_methods:
            t0 = time.perf_counter()
            guesses[name] = LABEL_ATTACKS.get(name)(case, **job.options.get(name, {}))
            seconds[name] = time.perf_counter() - t0
        if job.methods:
            labels = (np.sort(np.asarray(job.true_labels, dtype=np.int64))
                      if job.labels_from == "given"
                      else _label_array(guesses[job.label_methods[0]].counts))
            for name in job.methods:
                t0 = time.perf_counter()
                recs[name] = RECONSTRUCTIONS.get(name)(
                    case, num_samples=job.num_examples, labels=labels, budget=job.budget,
                    seed=job.seed, **job.options.get(name, {}))
                seconds[name] = time.perf_counter() - t0
        return CaseResult(job.client, job.round, guesses, recs, seconds)
    finally:
        torch.set_num_threads(threads)


#: runs update jobs: the jobs in, ``(position in jobs, CaseResult or the one-line error of
#: a job that failed)`` out as each finishes, in any order
UpdateJobRunner = Callable[[Sequence[UpdateJob]], Iterator[tuple[int, "CaseResult | str"]]]


def job_error(exc: BaseException) -> str:
    """The one line a failed job leaves in results.json's notes."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def run_in_process(jobs: Sequence[UpdateJob]) -> Iterator[tuple[int, CaseResult | str]]:
    """The :data:`UpdateJobRunner` of this process: one job after another."""
    for i, job in enumerate(jobs):
        try:
            yield i, run_update_job(job)
        except Exception as exc:  # noqa: BLE001 - a failed job is a note, not a failed run
            yield i, job_error(exc)
