"""Iterations of the update jobs while they run: each job's attacks report their optimiser
iterations (:mod:`attacks.iteration_progress`) to a :class:`Heartbeat`, which writes them to
one small JSON file per job at most once a second; a :class:`JobWatcher` thread of the run's
driver reads the files and shows the sum in the progress line ("2 running: 1,240 of 4,000
iterations, 35 it/s") and, every ``log_every`` seconds, in run.log.  A file is how a job on
a Ray actor speaks before it replies; a job in the driver's own process writes it too.

The files live in a hidden folder of the run directory that the stage removes when the
jobs are done (:func:`job_files`; a Ctrl-C, which ends the process at once, can leave it
until the stage runs again).  A heartbeat that cannot write (a full disk, a folder
another machine cannot see) stays silent: progress never fails a job.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("fedaudit")

__all__ = ["Heartbeat", "JobWatcher", "job_files", "read_heartbeats"]

#: the run directory's folder of heartbeat files (removed when the jobs are done)
FOLDER = ".update-job-progress"


class Heartbeat:
    """An :func:`attacks.iteration_progress.on_iterations` hook that writes ``{"method",
    "done", "total"}`` to ``path`` (atomically) when ``min_interval`` seconds have passed
    since its last write, and always at the last iteration."""

    def __init__(self, path: str | os.PathLike, method: str, *,
                 min_interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.path, self.method = Path(path), method
        self.min_interval, self.clock = min_interval, clock
        self.last: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and self.last is not None and now - self.last < self.min_interval:
            return
        self.last = now
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps({"method": self.method, "done": int(done),
                                       "total": int(total)}))
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is a courtesy: never a job's failure


def read_heartbeats(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Each job file's (current method, iterations done, iterations in all of that method);
    files being replaced or unreadable are skipped."""
    out = {}
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return out
    for p in paths:
        try:
            d = json.loads(p.read_text())
            out[p.stem] = (str(d["method"]), int(d["done"]), int(d["total"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


class JobWatcher:
    """A daemon thread that every ``every`` seconds sums the heartbeats of the jobs not yet
    finished and calls ``show(text)``; every ``log_every`` seconds it also logs the line.
    ``finished(key)`` drops a job from the sum."""

    def __init__(self, folder: Path, show: Callable[[str], None], *, every: float = 1.0,
                 log_every: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.folder, self.show = folder, show
        self.every, self.log_every, self.clock = every, log_every, clock
        self.done_keys: set[str] = set()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.start_time = clock()
        #: the most iterations seen per (job, method), finished ones too: the rate's count
        self.seen: dict[tuple[str, str], int] = {}
        self.logged = self.start_time
        self.thread = threading.Thread(target=self._loop, name="update-job-progress",
                                       daemon=True)

    def finished(self, key: str) -> None:
        with self.lock:
            self.done_keys.add(key)

    def line(self) -> str | None:
        """The progress text of now (None before any running job reported)."""
        beats = read_heartbeats(self.folder)
        with self.lock:
            for k, (method, done, _) in beats.items():
                self.seen[k, method] = max(done, self.seen.get((k, method), 0))
            running = {k: v for k, v in beats.items() if k not in self.done_keys}
        if not running:
            return None
        done = sum(d for _, d, _ in running.values())
        total = sum(t for _, _, t in running.values())
        elapsed = self.clock() - self.start_time
        rate = sum(self.seen.values()) / elapsed if elapsed > 0 else 0.0
        return (f"{len(running)} running: {done:,} of {total:,} iterations, "
                f"{rate:.0f} it/s")

    def poll(self) -> None:
        text = self.line()
        if text is None or self.stop_event.is_set():  # stopping: the caller has the last word
            return
        self.show(text)
        now = self.clock()
        if now - self.logged >= self.log_every:
            self.logged = now
            log.info("update attacks: %s", text)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.every):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a progress line must never stop the audit
                log.debug("update attacks: progress line failed", exc_info=True)

    def __enter__(self) -> "JobWatcher":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)


@contextmanager
def job_files(run_dir: Path) -> Iterator[Path]:
    """The heartbeat folder under ``run_dir``, created empty and removed afterwards (also
    after an error).  A Ctrl-C of ``fedaudit run`` ends the process at once and can leave
    it; the stage's next start (``--resume``) empties it first."""
    folder = Path(run_dir) / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
