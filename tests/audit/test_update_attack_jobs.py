"""The attacks on updates as jobs: one job's result does not depend on its runner (this
process, or a grid's actor reached through a ``query.update_attack`` message), a failed job
is a one-line error, the cache keys on what decides a result and survives a damaged
entry."""

import logging
from dataclasses import replace

import numpy as np
import pytest
import torch
from flwr.app import Context, Error, Message, RecordDict

from attacks.update_family import JobSpec
from fedaudit.audit import update_attack_cache as cache
from fedaudit.audit.update_attacks import UpdateJob, run_in_process, run_update_job
from fedaudit.config import load_scenario
from fedaudit.models.registry import image_model
from fedaudit.simulation.reference_federations import task_identity
from fedaudit.simulation.update_attack_jobs import GridJobRunner, attack_update

SHAPE, CLASSES = (1, 8, 8), 10


def _job(update_seed: int = 0, *, lr: float = 0.05, iterations: int = 5, methods=("dlg",),
         model: str = "mlp", family: str = "reconstruction", **settings) -> UpdateJob:
    """A client of 2 digits-sized samples whose update is one SGD step of lr on a made-up
    gradient (random, seeded by ``update_seed``): enough for the attacks to run; their quality is tested
    elsewhere.  The reconstruction family's job takes its labels from bias-count's guess."""
    scenario = load_scenario("reconstruction-digits")
    net = image_model(scenario.model, SHAPE, CLASSES, seed=0)
    start = {k: v.detach().clone() for k, v in net.state_dict().items()}
    g = torch.Generator().manual_seed(update_seed)
    received = {k: v - lr * torch.randn(v.shape, generator=g) for k, v in start.items()}
    base = ({"labels": "guess", "max_samples": 16, "iterations": iterations, "restarts": 1,
             "lr": 0.0, "seed": 0, "label_method": "bias-count", "label_options": {}}
            if family == "reconstruction" else {})
    spec = JobSpec(tuple(methods), {}, {**base, **settings}, np.array([3, 7]))
    return UpdateJob(scenario, family, 0, 1, 2, SHAPE, CLASSES, start, received, spec)


def _with(job: UpdateJob, **spec) -> UpdateJob:
    return replace(job, spec=replace(job.spec, **spec))


class FakeGrid:
    """Flower's Grid as the runner uses it: each pushed message is answered by the handler
    at once, in this process (``fail`` ids get an error reply instead; ``drop`` ids none)."""

    def __init__(self, nodes=(11, 12), fail=(), drop=()):
        self.nodes, self.fail, self.drop = list(nodes), set(fail), set(drop)
        self.replies, self.sent = {}, []

    def get_node_ids(self):
        return self.nodes

    def push_messages(self, messages):
        ids = []
        for i, m in enumerate(messages):
            mid = f"m{i}"
            m.metadata.__dict__["_message_id"] = mid
            self.sent.append((m.metadata.dst_node_id, m.metadata.message_type))
            if i in self.drop:
                pass
            elif i in self.fail:
                self.replies[mid] = Message(Error(code=0, reason="actor died\nsecond line"),
                                            reply_to=m)
            else:
                self.replies[mid] = attack_update(m, Context(0, 0, {}, RecordDict(), {}))
            ids.append(mid)
        return ids

    def pull_messages(self, ids):
        return [self.replies.pop(i) for i in list(ids) if i in self.replies]


@pytest.fixture(autouse=True)
def _in_a_flower_task():
    with task_identity():  # Flower's Message needs a run's identity
        yield


def _same(a, b):
    assert (a.client, a.round, a.family) == (b.client, b.round, b.family)
    assert a.outputs.keys() == b.outputs.keys() and a.outputs
    for m in a.outputs:
        if a.family == "label_leakage":
            np.testing.assert_array_equal(a.outputs[m].counts, b.outputs[m].counts)
            continue
        # bit-identical: the same arithmetic on the same thread count (one per job)
        np.testing.assert_array_equal(a.outputs[m].images, b.outputs[m].images)
        np.testing.assert_array_equal(a.outputs[m].labels, b.outputs[m].labels)
        assert a.outputs[m].loss == b.outputs[m].loss


def test_the_grid_runner_gives_what_the_job_gives_in_process():
    jobs = [_job(0), _job(1), _job(2, family="label_leakage", methods=("bias-count", "llg"))]
    grid = FakeGrid()
    got = dict(GridJobRunner(grid)(jobs))
    assert sorted(got) == [0, 1, 2]
    assert grid.sent == [(11, "query.update_attack"), (12, "query.update_attack"),
                         (11, "query.update_attack")]  # round-robin over the nodes
    for i, job in enumerate(jobs):
        _same(got[i], run_update_job(job))
    _same(dict(run_in_process(jobs))[1], got[1])


def test_a_failed_job_is_a_one_line_error_and_the_others_finish():
    jobs = [_job(0), _job(1, model="mlp"), _job(2)]
    bad = _with(jobs[1], methods=("no-such-attack",))
    got = dict(run_in_process([jobs[0], bad, jobs[2]]))
    assert isinstance(got[0], type(got[2])) and not isinstance(got[0], str)
    assert isinstance(got[1], str) and "no-such-attack" in got[1] and "\n" not in got[1]
    got = dict(GridJobRunner(FakeGrid(fail={1}))(jobs))
    assert got[1] == "the actor failed: actor died"
    assert not isinstance(got[0], str) and not isinstance(got[2], str)


def test_a_job_without_a_reply_is_an_error_after_the_timeout():
    got = dict(GridJobRunner(FakeGrid(drop={0}), timeout=0.0)([_job(0), _job(1)]))
    assert got[0] == "no reply within 0 s" and not isinstance(got[1], str)


def test_the_cache_key_follows_what_decides_the_result():
    base = _job(0)
    key = cache.cache_key(base)
    assert cache.cache_key(_job(0)) == key  # the same inputs
    assert cache.cache_key(replace(base, client=3, round=2)) == key
    changed = [_job(1),  # another update
               _job(0, iterations=6),  # another budget
               _job(0, methods=("inverting-gradients",)),
               _with(base, device="cuda"),
               _job(0, seed=1),
               _job(0, labels="given"),
               _job(0, label_method="llg"),
               _with(base, options={"dlg": {"lr": 0.5}}),
               _job(0, family="label_leakage", methods=("bias-count",))]
    keys = [cache.cache_key(j) for j in changed]
    assert key not in keys and len(set(keys)) == len(keys)
    given = _job(0, labels="given")
    other = _with(given, true_labels=np.array([3, 8]))
    assert cache.cache_key(given) != cache.cache_key(other)  # given labels are an input


def test_the_cache_round_trips_and_recomputes_a_damaged_entry(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FEDAUDIT_CACHE", str(tmp_path))
    job = _job(0)
    key = cache.cache_key(job)
    assert cache.load_cached(key) is None
    result = run_update_job(job)
    cache.save_cached(key, result)
    assert [p.name for p in cache.cache_dir().iterdir()] == [f"{key}.pkl"]  # no temp left
    _same(cache.load_cached(key), result)
    (cache.cache_dir() / f"{key}.pkl").write_bytes(b"not a pickle")
    with caplog.at_level(logging.WARNING, logger="fedaudit"):
        assert cache.load_cached(key) is None
    assert "unreadable" in caplog.text and "recomputing" in caplog.text


@pytest.mark.parametrize("runtime", ["driver", "grid", "auto"])
def test_update_job_runner_runs_in_process_without_a_simulation_grid(runtime):
    from fedaudit.simulation.update_attack_jobs import update_job_runner

    scenario = load_scenario("reconstruction-digits", [f"update_attacks.runtime={runtime}"])
    assert update_job_runner(scenario, None) is run_in_process

    class SimGrid(FakeGrid):
        pull_interval = 0.1  # what marks Flower's in-memory (simulation) grid

    runner = update_job_runner(scenario, SimGrid())
    assert (runner is run_in_process) == (runtime == "driver")


def test_each_finished_job_says_its_rate_and_what_is_left(tmp_path, monkeypatch, caplog):
    """The stage's progress line and run.log after each job: which job, the wall seconds
    per job so far and the time the others should take (cached jobs count as done)."""
    from types import SimpleNamespace

    from fedaudit.audit.stages.update_attacks import _run_jobs

    monkeypatch.setenv("FEDAUDIT_CACHE", str(tmp_path))
    steps = []
    ctx = SimpleNamespace(progress=SimpleNamespace(step=lambda *a: steps.append(a)),
                          run_dir=tmp_path)
    jobs = [_job(0, family="label_leakage", methods=("bias-count",)),
            _job(1, family="label_leakage", methods=("bias-count",))]
    with caplog.at_level(logging.INFO, logger="fedaudit"):
        results, cached, failed = _run_jobs(ctx, run_in_process, jobs)
    assert len(results) == 2 and cached == {"label_leakage": 0} and failed == {}
    # the last line is said again after the jobs (a progress thread's line may have come
    # between)
    assert [s[:3] for s in steps] == [("update attacks", 0, 2), ("update attacks", 1, 2),
                                      ("update attacks", 2, 2), ("update attacks", 2, 2)]
    assert steps[-1] == steps[-2]
    assert steps[1][3].startswith("label_leakage, client 0, round 1; ")
    assert " s per job, eta " in steps[1][3] and steps[2][3].endswith("eta 0 s")
    assert "update attacks: 2 of 2 jobs done" in caplog.text
    steps.clear()
    _run_jobs(ctx, run_in_process, jobs)  # both from the cache now
    assert steps == [("update attacks", 2, 2, "2 cached")]


def test_a_job_writes_its_iterations_and_the_stage_cleans_up(tmp_path, monkeypatch):
    """A job with a progress file leaves the last count of its last method there (DLG:
    one iteration per budget iteration); the stage gives each job to run a file in the run
    directory's hidden folder, and removes the folder when the jobs are done."""
    import json
    from types import SimpleNamespace

    from fedaudit.audit.job_progress import FOLDER
    from fedaudit.audit.stages.update_attacks import _run_jobs

    job = replace(_with(_job(0, iterations=5), settings={**_job().spec.settings,
                                                         "restarts": 2}),
                  progress_file=str(tmp_path / "beat.json"))
    out = run_update_job(job)
    assert json.loads((tmp_path / "beat.json").read_text()) == {"method": "dlg", "done": 10,
                                                               "total": 10}
    assert cache.cache_key(job) == cache.cache_key(replace(job, progress_file=None))
    _same(out, run_update_job(replace(job, progress_file=None)))
    monkeypatch.setenv("FEDAUDIT_CACHE", str(tmp_path / "cache"))
    seen = []

    def runner(jobs):
        seen.extend(j.progress_file for j in jobs)
        assert (tmp_path / "run" / FOLDER).is_dir()
        yield from run_in_process(jobs)

    (tmp_path / "run").mkdir()
    ctx = SimpleNamespace(progress=SimpleNamespace(step=lambda *a: None),
                          run_dir=tmp_path / "run")
    _run_jobs(ctx, runner, [_job(0), _job(1)])
    assert seen == [str(tmp_path / "run" / FOLDER / f"{i}.json") for i in (0, 1)]
    assert not (tmp_path / "run" / FOLDER).exists()


def test_the_time_left_counts_replies_not_positions(tmp_path, monkeypatch):
    """The grid's replies come in any order: the last reply leaves no time, whichever job
    it was."""
    from types import SimpleNamespace

    from fedaudit.audit.stages.update_attacks import _run_jobs

    monkeypatch.setenv("FEDAUDIT_CACHE", str(tmp_path))
    steps = []
    ctx = SimpleNamespace(progress=SimpleNamespace(step=lambda *a: steps.append(a)),
                          run_dir=tmp_path)
    jobs = [_job(i, family="label_leakage", methods=("bias-count",)) for i in range(3)]

    def backwards(sent):
        yield from reversed(list(run_in_process(sent)))

    clock = iter(range(0, 1000, 10))  # each look at the clock: 10 s later
    monkeypatch.setattr("fedaudit.audit.stages.update_attacks.time",
                        SimpleNamespace(perf_counter=lambda: next(clock)))
    _run_jobs(ctx, backwards, jobs)
    assert [s[1] for s in steps] == [0, 1, 2, 3, 3]
    # the first reply (job 2) after 10 s: 10 s per job, two jobs left
    assert steps[1][3] == "label_leakage, client 0, round 1; 10.0 s per job, eta 20 s"
    assert steps[2][3].endswith("eta 10 s") and steps[3][3].endswith("eta 0 s")
