"""The update jobs' iteration counts while they run: the attacks' hook, the heartbeat
files (throttled) and the driver's line summing the running jobs."""

import json
import logging

import numpy as np
import pytest

from attacks.iteration_progress import iteration_done, on_iterations
from fedaudit.audit.job_progress import Heartbeat, JobWatcher, job_files, read_heartbeats


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_without_a_hook_nothing_happens_and_hooks_nest():
    iteration_done(1, 2)  # no hook: a no-op
    outer, inner = [], []
    with on_iterations(lambda d, t: outer.append((d, t))):
        iteration_done(1, 3)
        with on_iterations(lambda d, t: inner.append((d, t))):
            iteration_done(2, 3)
        iteration_done(3, 3)
    iteration_done(4, 4)
    assert outer == [(1, 3), (3, 3)] and inner == [(2, 3)]


@pytest.mark.parametrize("name", ["inverting-gradients", "dlg"])
def test_the_attacks_report_every_iteration_over_all_restarts(name):
    from tests.attacks.test_reconstruction_attacks import _case

    from attacks.reconstruction import Budget, get_reconstruction

    calls = []
    run = lambda: get_reconstruction(name)(  # noqa: E731
        _case(), num_samples=3, labels=np.array([3, 1, 4]), budget=Budget(4, 2), seed=0)
    with on_iterations(lambda d, t: calls.append((d, t))):
        heard = run()
    assert calls == [(d, 8) for d in range(1, 9)]
    np.testing.assert_array_equal(heard.images, run().images)  # listening changes nothing


def test_a_heartbeat_writes_at_most_once_a_second_and_always_the_last(tmp_path):
    clock, path = Clock(), tmp_path / "job.json"
    beat = Heartbeat(path, "dlg", min_interval=1.0, clock=clock)
    beat(1, 10)
    assert json.loads(path.read_text()) == {"method": "dlg", "done": 1, "total": 10}
    clock.t = 0.5
    beat(2, 10)  # too soon: not written
    assert json.loads(path.read_text())["done"] == 1
    clock.t = 1.0
    beat(3, 10)
    assert json.loads(path.read_text())["done"] == 3
    clock.t = 1.1
    beat(10, 10)  # the last iteration is always written
    assert json.loads(path.read_text())["done"] == 10
    assert [p.name for p in tmp_path.iterdir()] == ["job.json"]  # no temporary left


def test_a_heartbeat_that_cannot_write_is_silent(tmp_path):
    Heartbeat(tmp_path / "missing" / "job.json", "dlg")(1, 2)  # no folder: no error


def test_the_watcher_sums_the_running_jobs_and_logs_now_and_then(tmp_path, caplog):
    clock, shown = Clock(), []
    (tmp_path / "0.json").write_text(json.dumps({"method": "dlg", "done": 100, "total": 400}))
    (tmp_path / "1.json").write_text(json.dumps({"method": "dlg", "done": 300, "total": 400}))
    (tmp_path / "2.json").write_text("{not json")  # being written: skipped
    assert read_heartbeats(tmp_path) == {"0": ("dlg", 100, 400), "1": ("dlg", 300, 400)}
    w = JobWatcher(tmp_path, shown.append, log_every=30.0, clock=clock)
    clock.t = 10.0
    with caplog.at_level(logging.INFO, logger="fedaudit"):
        w.poll()
        assert shown == ["2 running: 400 of 800 iterations, 40 it/s"]
        assert "update attacks" not in caplog.text  # 10 s: not logged yet
        w.finished("1")
        clock.t = 40.0
        w.poll()  # job 1 done: its 300 iterations still count toward the rate
        assert shown[-1] == "1 running: 100 of 400 iterations, 10 it/s"
        assert "update attacks: 1 running: 100 of 400 iterations" in caplog.text
    w.finished("0")
    w.poll()
    assert len(shown) == 2  # nothing running: nothing shown


def test_the_watcher_thread_starts_and_stops_and_the_folder_goes(tmp_path):
    shown = []
    with job_files(tmp_path) as folder:
        (folder / "0.json").write_text(json.dumps({"method": "x", "done": 1, "total": 2}))
        with JobWatcher(folder, shown.append, every=0.01) as w:
            for _ in range(1000):  # at most 10 s
                if shown:
                    break
                w.stop_event.wait(0.01)
        assert not w.thread.is_alive()
    assert not folder.exists() and shown[0].startswith("1 running: 1 of 2 iterations")


def test_a_job_s_second_method_adds_to_the_rate_and_a_stopping_watcher_is_silent(tmp_path):
    """The rate counts every (job, method)'s iterations: a job's second method starting
    from 1 does not hide its first's; once stopping, the watcher shows nothing more."""
    clock, shown = Clock(), []
    beat = tmp_path / "0.json"
    w = JobWatcher(tmp_path, shown.append, clock=clock)
    beat.write_text(json.dumps({"method": "inverting-gradients", "done": 100, "total": 100}))
    clock.t = 1.0
    w.poll()
    beat.write_text(json.dumps({"method": "dlg", "done": 50, "total": 200}))
    clock.t = 2.0
    w.poll()
    assert shown == ["1 running: 100 of 100 iterations, 100 it/s",
                     "1 running: 50 of 200 iterations, 75 it/s"]  # (100 + 50) / 2 s
    w.stop_event.set()
    w.poll()
    assert len(shown) == 2
