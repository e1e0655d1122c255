"""Bad input, malformed replies, resume's input errors, security (the reliability issue;
faulty clients, and a run killed and resumed: tests/e2e/test_reliability_runs.py)."""

import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import (ArrayRecord, ConfigRecord, Error, Message, MessageType, MetricRecord,
                      RecordDict)
from flwr.serverapp.strategy import FedAvg

from fedaudit.config import ScenarioError, load_scenario
from fedaudit.rundir import load_checkpoint
from fedaudit.probes import ProbeRun
from fedaudit.probes.update_gnq import UpdateGnq
from fedaudit.probes.update_norm import UpdateNorm
from strategies.auditing import AuditingStrategy


# ---------------------------------------------------------------- strategy unit tests


GLOBAL = {"w": torch.zeros(3, 2), "b": torch.zeros(2)}


def _reply(node: int, arrays: dict | None, *, pid: int | None = None, n: int = 10,
           loss: float = 0.5, error: str | None = None, extra_metrics: dict | None = None):
    out = Message(content=RecordDict({"arrays": ArrayRecord(GLOBAL), "config": ConfigRecord({})}),
                  dst_node_id=node, message_type=MessageType.TRAIN)
    if error is not None:
        return Message(Error(code=1, reason=error), reply_to=out)
    content = RecordDict()
    if arrays is not None:
        content["arrays"] = ArrayRecord(arrays)
    metrics = {"num-examples": n, "train-loss": loss, "partition-id": node if pid is None else pid}
    metrics.update(extra_metrics or {})
    content["metrics"] = MetricRecord(metrics)
    return Message(content=content, reply_to=out)


def _strategy(rounds: list, min_clients: int = 1) -> AuditingStrategy:
    run = ProbeRun(load_scenario("quickstart"), Path("."))  # rounds.jsonl keys only
    strat = AuditingStrategy(FedAvg(fraction_evaluate=0.0), min_clients=min_clients,
                             probes=[UpdateNorm(run), UpdateGnq(run)],
                             on_round=lambda r, arrays, audit: rounds.append((r, arrays, audit)))
    strat._global = ArrayRecord(GLOBAL)
    return strat


def _good(node: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(3, 2, generator=g), "b": torch.randn(2, generator=g)}


BAD_REPLIES = [
    ("nan", lambda: _reply(9, {"w": torch.full((3, 2), float("nan")), "b": torch.zeros(2)}),
     "non-finite"),
    ("inf", lambda: _reply(9, {"w": torch.zeros(3, 2), "b": torch.tensor([0.0, float("inf")])}),
     "non-finite"),
    ("wrong shape", lambda: _reply(9, {"w": torch.zeros(2, 3), "b": torch.zeros(2)}),
     "expected float32[3, 2]"),
    ("wrong dtype", lambda: _reply(9, {"w": torch.zeros(3, 2, dtype=torch.float64),
                                       "b": torch.zeros(2)}), "float64"),
    ("missing key", lambda: _reply(9, {"w": torch.zeros(3, 2)}), "missing ['b']"),
    ("extra key", lambda: _reply(9, {**GLOBAL, "c": torch.zeros(1)}), "extra ['c']"),
    ("no arrays", lambda: _reply(9, None), "no ArrayRecord"),
    ("zero examples", lambda: _reply(9, GLOBAL, n=0), "positive"),
    ("nan loss", lambda: _reply(9, GLOBAL, loss=float("nan")), "not finite"),
    ("client error", lambda: _reply(9, None, error="Traceback: boom"), "client error"),
]


@pytest.mark.parametrize("name, make, reason", BAD_REPLIES, ids=[b[0] for b in BAD_REPLIES])
def test_malformed_reply_rejected_rest_aggregated(identity, name, make, reason):
    rounds = []
    strat = _strategy(rounds)
    good = [_reply(i, _good(i, i)) for i in range(3)]
    arrays, _ = strat.aggregate_train(1, [good[0], make(), good[1], good[2]])
    assert arrays is not None
    inputs = {k: np.stack([g.content["arrays"][k].numpy().astype(np.float64) for g in good])
              for k in GLOBAL}
    for k in GLOBAL:
        # FedAvg sums in float32: the error is absolute, a few ulps of the largest input
        atol = 8 * np.finfo(np.float32).eps * np.abs(inputs[k]).max()
        np.testing.assert_allclose(arrays[k].numpy(), inputs[k].mean(axis=0), rtol=0, atol=atol)
    (_, _, audit), = rounds
    assert len(audit.failures) == 1 and reason in audit.failures[0]["reason"], audit.failures
    assert [c.partition_id for c in audit.clients] == [0, 1, 2]
    gnq = audit.record.entries["gnq_update"]
    assert list(gnq) == ["0", "1", "2"] and all(np.isfinite(v) for v in gnq.values())


def test_too_few_valid_replies_keep_previous_model(identity):
    rounds = []
    strat = _strategy(rounds, min_clients=3)
    bad = {"w": torch.full((3, 2), float("nan")), "b": torch.zeros(2)}
    arrays, _ = strat.aggregate_train(4, [_reply(0, _good(0, 0)), _reply(1, bad),
                                          _reply(2, _good(2, 2))])
    assert arrays is None
    (r, none, audit), = rounds
    assert r == 4 and none is None and not audit.aggregated
    assert "only 2 valid replies" in audit.note and len(audit.failures) == 1


def test_aggregate_independent_of_reply_order(identity):
    replies = [_reply(i, _good(i, 100 + i), n=7 + i) for i in range(6)]
    results = []
    for seed in range(5):
        order = replies[:]
        random.Random(seed).shuffle(order)
        arrays, _ = _strategy([]).aggregate_train(1, order)
        results.append({k: arrays[k].numpy().tobytes() for k in GLOBAL})
    assert all(r == results[0] for r in results)


def test_round_offset_reports_true_round(identity):
    rounds = []
    strat = _strategy(rounds)
    strat.round_offset = 3
    strat.aggregate_train(1, [_reply(0, _good(0, 0))])
    assert rounds[0][0] == 4


@pytest.mark.parametrize("setup, fragment", [
    (lambda d: None, "no such run directory"),
    (lambda d: d.mkdir(), "no scenario.toml"),
    (lambda d: (d.mkdir(), (d / "scenario.toml").write_text("[federation]\nrounds = 'x'\n")),
     "wrong type"),
    (lambda d: (d.mkdir(), (d / "scenario.toml").write_text(
        "[federation]\nstrategy = 'FedAdam'\n"), (d / "rounds.jsonl").write_text("")),
     "keeps server optimizer state"),
])
def test_resume_input_errors(tmp_path, setup, fragment):
    target = tmp_path / "run"
    setup(target)
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "run", "--resume", str(target)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and fragment in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- bad input never tracebacks

MALFORMED = [
    ["run"],
    ["run", "quickstart", "--resume", "x"],
    ["run", "quickstart", "--set", "federation.rounds=-3"],
    ["run", "quickstart", "--set", "federation.rounds=1e9"],
    ["run", "quickstart", "--set", "federation.num_clients=5000"],
    ["run", "quickstart", "--set", "federation.client_resources.num_cpus=64"],
    ["run", "quickstart", "--set", "federation.client_resources.num_gpus=1"],
    ["run", "quickstart", "--set", "federation.strategy='os.system'"],
    ["run", "quickstart", "--set", "model.name='__import__'"],
    ["run", "quickstart", "--set", "data.dataset=npz", "--set", "data.path=/etc/passwd"],
    ["run", "quickstart", "--set", "data.dataset=npz", "--set", "data.path=/nonexistent.npz"],
    ["run", "quickstart", "--set", "data.partitioner=pathological",
     "--set", "data.classes_per_client=11"],
    ["run", "quickstart", "--set", "scenario.name='../../etc'"],
    ["run", "quickstart", "--set", "train.lr=inf"],
    ["run", "quickstart", "--set", "train.batch_size=0"],
    ["run", "quickstart", "--set", "attack.methods=[]"],
    ["run", "quickstart", "--set", "attack.methods=['loss','loss']"],
    ["run", "quickstart", "--set", "audit.quantization.checkpoints=last-0"],
    ["run", "quickstart", "--set", "attack.resmia.sizes=[4,8]"],
    ["run", "quickstart", "--set", "canaries.count=1000"],
    ["run", "quickstart", "--set", "faults.crash_rate=1.5"],
    ["run", "quickstart", "--set", "audit.gnq.lam=-1"],
    ["run", "quickstart", "--set", "scenario.seed=-1"],
    ["run", "quickstart", "--set", "federation.rounds=\"3\""],
    ["run", "quickstart", "--set", "[federation]"],
    ["run", "/dev/null"],
    ["run", "/"],
    ["validate", "quickstart", "--set", "data.max_samples=5"],
    ["validate", "quickstart", "--set", "federation.num_clients=2000"],
    ["report", "/nonexistent-run"],
    ["compare", "/nonexistent-run"],
]


@pytest.mark.parametrize("args", MALFORMED, ids=[" ".join(a)[:60] for a in MALFORMED])
def test_malformed_input_one_line_exit_2(tmp_path, args):
    if args[:2] == ["run", "quickstart"] or (args and args[0] == "run" and len(args) > 1):
        args = args + ["--out", str(tmp_path / "out")]
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr[-1500:])
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- security


class _Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_checkpoints_never_unpickle_code(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(1), "evil": _Payload()}, path)
    with pytest.raises(pickle.UnpicklingError):
        load_checkpoint(path)


def test_scenario_cannot_name_arbitrary_code():
    for override in ("federation.strategy='subprocess.Popen'", "model.name='os.system'",
                     "data.dataset='pickle'", "attack.methods=['os.system']"):
        with pytest.raises(ScenarioError, match="unknown choice"):
            load_scenario("quickstart", [override])


def test_run_directory_stays_under_out(tmp_path):
    from fedaudit.rundir import create_run_dir

    run = create_run_dir(tmp_path / "out", "quickstart")
    assert run.resolve().parent == (tmp_path / "out").resolve()
    with pytest.raises(ScenarioError, match="may only contain"):
        load_scenario("quickstart", ["scenario.name='..'"])
