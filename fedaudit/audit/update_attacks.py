"""The attacks on updates, one job per kept (client, round) case and family: what the server holds
(:class:`attacks.update_case.UpdateCase`, built from the ``client-updates`` probe's files and
the scenario's training recipe) in, each of the family's attacks' outputs out (scored later
against the client's true samples of the round -- the audit's ground truth, which no
attack sees: :mod:`fedaudit.audit.stages.update_attacks`).

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
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from attacks.update_case import LocalTraining, UpdateCase
from attacks.update_family import CaseOutput, JobSpec
from fedaudit.scenario import Scenario

__all__ = ["CaseResult", "UpdateJob", "UpdateJobRunner", "local_training", "run_in_process",
           "run_update_job"]


def local_training(scenario: Scenario, num_examples: int, merged: int = 1) -> LocalTraining:
    """What the server knows of a client's local training: the scenario's ``[train]``
    recipe and the client's reported ``num_examples``.  A round's aggregate of ``merged``
    clients is attacked as one client holding their ``num_examples`` samples whose batches
    are ``merged`` times larger: the mean of the clients' steps on their own batches is a
    step on the union of the batches (exact for one local step of FedAvg weighted by
    num_examples; docs/algorithms.md section 22)."""
    t = scenario.train
    return LocalTraining(lr=t.lr, momentum=t.momentum if t.optimizer == "sgd" else 0.0,
                         weight_decay=t.weight_decay, optimizer=t.optimizer,
                         local_epochs=t.local_epochs, batch_size=t.batch_size * merged,
                         num_examples=num_examples)


@dataclass(frozen=True)
class UpdateJob:
    """One (client, round) case and one family's attacks to run on it
    (:class:`attacks.update_family.JobSpec`)."""

    scenario: Scenario
    #: the family's name (:data:`attacks.update_family.FAMILIES`)
    family: str
    client: int
    round: int
    num_examples: int
    input_shape: tuple[int, ...]
    num_classes: int
    start: dict[str, torch.Tensor]
    received: dict[str, torch.Tensor]
    spec: JobSpec
    #: how many clients' updates the case averages: 1 for one client's update, K for a
    #: round's aggregate of K clients (``client`` is then
    #: :data:`attacks.update_family.AGGREGATE_CLIENT`)
    merged: int = 1
    #: where the job writes its iterations while it runs (None: nowhere); not part of what
    #: decides its result (:mod:`fedaudit.audit.job_progress`)
    progress_file: str | None = None


@dataclass(frozen=True)
class CaseResult(CaseOutput):
    """What one job produced (:class:`attacks.update_family.CaseOutput`: per method, its
    attack's output and seconds) and the family that produced it."""

    family: str = ""


def _case(job: UpdateJob) -> UpdateCase:
    from fedaudit.models.registry import image_model
    from fedaudit.training.losses import batch_loss

    model = image_model(job.scenario.model, job.input_shape, job.num_classes,
                        seed=job.scenario.seed)  # weights replaced by start below
    model.load_state_dict(job.start)
    update = {k: job.received[k].double() - job.start[k].double() for k in job.start}
    return UpdateCase(model=model, start=job.start, update=update,
                      training=local_training(job.scenario, job.num_examples, job.merged),
                      input_shape=job.input_shape, num_classes=job.num_classes,
                      box=(0.0, 1.0), loss=batch_loss)


def _heartbeat(job: UpdateJob, method: str) -> AbstractContextManager:
    """The job's iterations of ``method`` to its progress file, if it has one."""
    if job.progress_file is None:
        return nullcontext()
    from attacks.iteration_progress import on_iterations
    from fedaudit.audit.job_progress import Heartbeat

    return on_iterations(Heartbeat(job.progress_file, method))


def run_update_job(job: UpdateJob) -> CaseResult:
    """The family's attacks of ``job`` on its case, in order, each timed, with one torch
    thread (the result does not depend on the runner)."""
    from attacks.update_family import FAMILIES

    family = FAMILIES.get(job.family)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        case = _case(job)
        prepared = family.prepare(case, job.spec)
        outputs, seconds = {}, {}
        for name in job.spec.methods:
            t0 = time.perf_counter()
            with _heartbeat(job, name):
                outputs[name] = family.attack(case, name, job.spec, prepared)
            seconds[name] = time.perf_counter() - t0
        return CaseResult(job.client, job.round, outputs, seconds, family=job.family)
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
