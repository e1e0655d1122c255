"""Faulty clients never kill a run; a run killed with SIGKILL after round 2 and resumed
matches an uninterrupted one (Flower + Ray, the command line), local training augmented
(``train.augment = "flip+crop"``: the views a resumed round draws are the ones it would
have drawn)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from fedaudit.config import load_scenario
from fedaudit.rundir import load_checkpoint
from fedaudit.rundir.client_models import client_model_rounds
from fedaudit.rundir.layout import client_model_path
from fedaudit.simulation.client import draw_faults

from tests.helpers.results import result_numbers


# ---------------------------------------------------------------- faults end to end

FAULTY = ["federation.num_clients=4", "federation.rounds=3", "faults.crash_rate=0.3",
          "faults.nan_rate=0.3", "faults.seed=3", "canaries.count=0",
          "audit.quantization.quantizers=['fp32', 'int4']", "attack.methods=['loss', 'resmia']"]


def test_faulty_clients_never_kill_the_run(tmp_path):
    from fedaudit.simulation.runner import run

    scenario = load_scenario("quickstart", FAULTY)
    expected = []
    for r in range(1, 4):
        faults = [draw_faults(scenario.faults, r, c) for c in range(4)]
        expected.append(sum(crash or nan for crash, nan in faults))
    assert 0 < sum(expected) < 12  # the seed gives a mix of good and faulty replies
    run_dir, res = run(scenario, tmp_path)
    assert [r["failures"] for r in res["rounds"]] == expected
    lines = [json.loads(x) for x in (run_dir / "rounds.jsonl").read_text().splitlines()]
    reasons = [f["reason"] for line in lines for f in line["failure_reasons"]]
    assert any("non-finite" in r for r in reasons) and any("crash of client" in r for r in reasons)
    assert np.isfinite(res["model"]["test_accuracy"])
    state = load_checkpoint(sorted((run_dir / "checkpoints").glob("round-*.pt"))[-1])
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


# ---------------------------------------------------------------- crash and resume

RESUMABLE = ["federation.num_clients=3", "federation.rounds=4", "canaries.count=2",
             "canaries.clients=[0]", "audit.quantization.quantizers=['fp32', 'binary']",
             "attack.methods=['loss']", "attack.targets=['global','clients']",
             "attack.rounds=all", "train.augment='flip+crop'"]


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "fedaudit.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def _sets(values):
    out = []
    for v in values:
        out += ["--set", v]
    return out


def test_sigkill_after_round_2_then_resume_matches_uninterrupted(tmp_path):
    full = _cli("run", "quickstart", "--out", str(tmp_path / "full"), "--no-report",
                *_sets(RESUMABLE))
    out, err = full.communicate(timeout=600)
    assert full.returncode == 0, err[-2000:]
    full_dir = Path(out.strip().splitlines()[-1])

    victim = _cli("run", "quickstart", "--out", str(tmp_path / "killed"), "--no-report",
                  *_sets(RESUMABLE))
    deadline = time.monotonic() + 300
    jsonl = None
    while time.monotonic() < deadline:
        found = list((tmp_path / "killed").glob("*/rounds.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 2:
            jsonl = found[0]
            break
        assert victim.poll() is None, victim.stderr.read()[-2000:]
        time.sleep(0.05)
    assert jsonl is not None, "the run never finished round 2"
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=60)
    killed_dir = jsonl.parent
    done = len(jsonl.read_text().splitlines())
    assert 2 <= done < 4, f"killed too late ({done} rounds done)"
    assert not (killed_dir / "results.json").exists()
    # what a kill during round done + 1 can leave: a kept model of that unfinished round
    # (client 9 never exists, so it cannot be overwritten by the resumed round)
    stale = client_model_path(killed_dir, done + 1, 9)
    stale.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(killed_dir / "checkpoints" / "round-0001.pt", stale)

    resumed = _cli("run", "--resume", str(killed_dir), "--no-report")
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-2000:]
    assert Path(out.strip().splitlines()[-1]) == killed_dir

    for r in range(1, 5):
        a = load_checkpoint(full_dir / "checkpoints" / f"round-{r:04d}.pt")
        b = load_checkpoint(killed_dir / "checkpoints" / f"round-{r:04d}.pt")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), r
    rounds_a = (full_dir / "rounds.jsonl").read_text().splitlines()
    rounds_b = (killed_dir / "rounds.jsonl").read_text().splitlines()
    assert rounds_a == rounds_b
    res_a = json.loads((full_dir / "results.json").read_text())
    res_b = json.loads((killed_dir / "results.json").read_text())
    assert result_numbers(res_a) == result_numbers(res_b)
    with np.load(full_dir / "gnq_samples.npz") as ga, np.load(killed_dir / "gnq_samples.npz") as gb:
        assert all(np.array_equal(ga[k], gb[k]) for k in ga.files)
    # the curious server's view: the client models kept for rounds 1-4 (those of the round
    # the kill interrupted were dropped on resuming and saved again), attacked alike
    assert client_model_rounds(killed_dir) == client_model_rounds(full_dir) == \
        {r: [0, 1, 2] for r in range(1, 5)}
    assert res_a["server_view"] == res_b["server_view"]
    with np.load(full_dir / "scores.npz") as sa, np.load(killed_dir / "scores.npz") as sb:
        assert all(np.array_equal(sa[k], sb[k]) for k in sa.files)
