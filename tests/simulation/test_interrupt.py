"""Ctrl-C's process handling without a run: descendants, a forked child (Ctrl-C on a run:
tests/e2e/test_interrupt_run.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedaudit.console.interrupt import descendants


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
def test_descendants_lists_children_and_grandchildren():
    child = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys, time;"
                              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']);"
                              "print(p.pid, flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        found = descendants()
        assert child.pid in found and grandchild in found
        assert found.index(child.pid) < found.index(grandchild)  # parents first
    finally:
        os.kill(grandchild, signal.SIGKILL)
        child.kill()
        child.wait()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_ends_silently_and_leaves_the_report_to_the_owner():
    """Ctrl-C reaches the whole process group: a child forked while the handler was
    installed (Ray forks helpers as it starts) must not print a second "interrupted"
    line (it did: the CI saw the line twice during Ray's start)."""
    from fedaudit.console.interrupt import EXIT_INTERRUPTED, stop_cleanly_on_sigint

    read_end, write_end = os.pipe()
    with stop_cleanly_on_sigint(lambda: "in the test"):
        pid = os.fork()
        if pid == 0:  # the child: stderr into the pipe, wait for the signal
            os.dup2(write_end, 2)
            sys.stderr = os.fdopen(write_end, "w")  # pytest's capture is not fd 2
            for _ in range(1000):  # at most 10 s, should the signal not end it
                time.sleep(0.01)
            os._exit(3)
        os.close(write_end)
        time.sleep(0.2)
        os.kill(pid, signal.SIGINT)
        _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end) as f:
        said = f.read()
    assert os.waitstatus_to_exitcode(status) == EXIT_INTERRUPTED
    assert said == ""
