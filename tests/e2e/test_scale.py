"""Scale-out: a run joins an existing Ray cluster started with ``ray start --head``.

The cluster is a real Ray head (GCS, raylet, agents) started as separate processes by
the venv's ``ray`` executable, in its own temp dir, on a free port. The scenario is
passed the cluster's address (``federation.init_args.address``), ``runner.run`` runs it,
and the test then reads the CLUSTER's own GCS tables to check that the run's driver was a
job of that cluster and that its ClientApp actors were scheduled there.

Teardown stops exactly this cluster: ``ray stop --force`` would kill every Ray process of
the machine by name (including Ray instances of other test runs or users), so the
fixture does what it does -- raylet first, then the agents and workers, GCS last, SIGKILL
as with ``--force`` -- but only for the processes whose command line names this cluster's
temp dir and their descendants, and checks that none is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fedaudit.config import load_scenario

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="finds the cluster's processes through /proc (Linux)")

RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"  # a zombie has exited


def _cluster_pids(temp_dir: str) -> list[int]:
    """Processes of the cluster rooted at ``temp_dir``: every process whose command line
    names it (GCS, raylet, monitor, dashboard, log monitor) and all their descendants
    (workers and agents are the raylet's children and rename themselves ``ray::...``)."""
    children: dict[int, list[int]] = {}
    roots = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(pid)
        if temp_dir in _cmdline(pid):
            roots.append(pid)
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out and pid != os.getpid():
            out.append(pid)
            todo.extend(children.get(pid, []))
    return [p for p in out if _alive(p)]


def _stop_cluster(temp_dir: str, timeout: float = 15.0) -> list[int]:
    """SIGKILL this cluster's processes in ``ray stop``'s order; return survivors."""
    pids = _cluster_pids(temp_dir)
    buckets = ([p for p in pids if "raylet" in _cmdline(p) and "gcs_server" not in _cmdline(p)],
               [p for p in pids if "raylet" not in _cmdline(p) and "gcs_server" not in _cmdline(p)],
               [p for p in pids if "gcs_server" in _cmdline(p)])
    for bucket in buckets:
        for pid in bucket:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout / 3
        while any(_alive(p) for p in bucket) and time.monotonic() < deadline:
            time.sleep(0.1)
    deadline = time.monotonic() + 5
    while (left := _cluster_pids(temp_dir)) and time.monotonic() < deadline:
        for pid in left:  # workers the raylet spawned while it was being stopped
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return _cluster_pids(temp_dir)


@pytest.fixture
def ray_cluster(monkeypatch):
    """A Ray head on a free port in its own temp dir; yields (address, temp_dir)."""
    import ray

    if ray.is_initialized():  # an earlier test left this process connected somewhere
        ray.shutdown()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert RAY.exists(), f"no ray executable next to {sys.executable}"
    port = _free_port()
    # short and unique: Ray puts unix sockets under it (path length limit ~107 bytes)
    temp_dir = tempfile.mkdtemp(prefix="fa-ray-", dir="/tmp")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    try:
        proc = subprocess.run(
            [str(RAY), "start", "--head", f"--port={port}", "--num-cpus=2",
             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
            capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        yield f"127.0.0.1:{port}", temp_dir
    finally:
        if ray.is_initialized():
            ray.shutdown()
        left = _stop_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"Ray processes of the test cluster survived: {left}"


def test_run_joins_existing_ray_cluster(ray_cluster, tmp_path):
    import ray
    import ray._private.state as ray_state

    from fedaudit.simulation import runner

    address, temp_dir = ray_cluster
    scenario = load_scenario("quickstart", [
        "federation.num_clients=3", "federation.rounds=2", "train.local_epochs=1",
        f"federation.init_args.address='{address}'",
        "audit.quantization.quantizers=['fp32','int4']", "attack.methods=['loss']"])
    run_dir, results = runner.run(scenario, tmp_path)

    # the run completed, with results
    assert (run_dir / "results.json").exists()
    assert [r["round"] for r in results["rounds"]] == [1, 2]
    assert all(r["failures"] == 0 for r in results["rounds"])
    assert results["model"]["test_accuracy"] > 0.3
    assert [q["quantizer"] for q in results["quantization"]] == ["fp32", "int4"]
    assert set(results["attacks"]) == {"loss"}
    assert not ray.is_initialized()  # Flower's backend disconnected at the end

    # ... and it ran on THIS cluster: ask the cluster's GCS (a fresh connection)
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        session = Path(ray._private.worker.global_worker.node.get_session_dir_path())
        assert session.parent.resolve() == Path(temp_dir).resolve()  # the probe is on it
        me = os.getpid()
        jobs = sorted((j for j in ray_state.jobs() if j["DriverPid"] == me),
                      key=lambda j: j["JobID"])
        # the run's driver (this process, inside runner.run) was a job of the cluster,
        # finished now; the last job is this probe connection, alive
        assert len(jobs) == 2, jobs
        run_job, probe_job = jobs
        assert run_job["IsDead"] and not probe_job["IsDead"]
        actors = [a for a in ray_state.actors().values() if a["JobID"] == run_job["JobID"]]
        assert actors and all(a["ActorClassName"] == "ClientAppActor" for a in actors)
        # 2 CPUs and num_cpus = 1 per client: the run's pool had 2 actors, on this node
        assert len(actors) == 2
        assert {a["Address"]["NodeID"] for a in actors} == {n["NodeID"] for n in ray.nodes()}
    finally:
        ray.shutdown()
