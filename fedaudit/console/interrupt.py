"""Ctrl-C for long commands: one line, exit code 130, no Ray process left behind.

Why not the default ``KeyboardInterrupt``: Flower's in-process simulation runs the
ServerApp in a non-daemon thread and the clients in a thread pool, so the exception in the
main thread leaves both running; Python then waits for them at exit (a hang until a second
Ctrl-C, which prints a ``concurrent.futures`` traceback).  Nothing needs unwinding instead:
every file of a run directory is written atomically (:mod:`fedaudit.rundir`) and a round
counts as finished only once its line is in ``rounds.jsonl``, so the first SIGINT can kill
the process tree and leave a run directory that ``--resume`` continues.

The handler (main thread) prints the caller's one-line status, flushes the log files and
ends the process with ``os._exit(130)``; a helper forked at that moment then SIGKILLs
every descendant process (Ray's GCS, raylet and workers of a local cluster; an existing
cluster joined with ``address`` is not ours and is left alone).  In that order because
killing the raylet while the driver lives lets Ray's core worker end the driver first,
with exit code 1 ("The connection to the plasma store is failed. Terminate the
process.", seen in a loaded test run).  A watchdog thread ends the process anyway after
:data:`DEADLINE_SECONDS` should any of that block.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

EXIT_INTERRUPTED = 130
DEADLINE_SECONDS = 8.0


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process:
    ``[state, ppid, pgrp, session, ...]``; nothing where /proc does not exist."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: nothing to enumerate
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        yield int(entry.name), stat[stat.rfind(")") + 2:].split()


def _children_by_parent() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pid, fields in process_stats():
        if len(fields) >= 2:
            out.setdefault(int(fields[1]), []).append(pid)
    return out


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (default: this one), parents before children."""
    tree = _children_by_parent()
    out, todo = [], [os.getpid() if pid is None else pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_descendants() -> int:
    """SIGKILL every descendant process; return how many were signalled."""
    n = 0
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            n += 1
    return n


def _exit_then_kill(pids: list[int]) -> None:
    """Exit with 130 first, then SIGKILL ``pids``.  Killing Ray's processes before exiting
    races with Ray: the driver's core worker notices its raylet die and ends the process
    with exit code 1 (seen under load).  So a forked helper waits until this process is
    gone (its parent changes) and kills them then."""
    parent = os.getpid()
    if pids and os.fork() == 0:  # the helper: only os calls, no Python machinery
        try:
            deadline = time.monotonic() + DEADLINE_SECONDS
            while os.getppid() == parent and time.monotonic() < deadline:
                time.sleep(0.002)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            os._exit(0)
    os._exit(EXIT_INTERRUPTED)


def _flush_logs() -> None:
    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in
                                          list(logging.root.manager.loggerDict))]:
        for handler in getattr(logger, "handlers", []):
            with contextlib.suppress(Exception):
                handler.flush()


@contextlib.contextmanager
def stop_cleanly_on_sigint(status: Callable[[], str],
                           before_exit: Callable[[], None] | None = None) -> Iterator[None]:
    """Within the block, the first SIGINT prints ``fedaudit: interrupted <status()>`` on
    stderr, logs it to the ``fedaudit`` logger, kills the process tree and exits with 130.
    ``before_exit`` (e.g. stop a progress display) runs first; its errors are ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    owner = os.getpid()

    def handler(signum, frame) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C changes nothing
        if os.getpid() != owner:
            # a child forked while the handler was installed (Ray forks helpers while it
            # starts) got the terminal's SIGINT too: it ends silently, the owner reports
            os._exit(EXIT_INTERRUPTED)
        watchdog = threading.Timer(DEADLINE_SECONDS, os._exit, args=(EXIT_INTERRUPTED,))
        watchdog.daemon = True
        watchdog.start()
        if before_exit is not None:
            with contextlib.suppress(Exception):
                before_exit()
        try:
            line = f"interrupted {status()}".rstrip()
        except Exception:  # noqa: BLE001 - the status text must never block the exit
            line = "interrupted"
        with contextlib.suppress(Exception):
            logging.getLogger("fedaudit").warning("%s", line)
        with contextlib.suppress(Exception):
            print(f"fedaudit: {line}", file=sys.stderr, flush=True)
        _flush_logs()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        _exit_then_kill(descendants())

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
