"""The malicious server end to end (digits, 4 clients of 4, one SGD step, 64 bins): the
samples it reads back near-exactly from the aggregate are exactly those alone in an upper
interval of its block (computed here from the true data and the thresholds), with plain
FedAvg; through SecAgg+ it still reads only such samples, and some."""

import json

import numpy as np

from attacks.imprint import gaussian_thresholds
from fedaudit.config import from_toml
from fedaudit.data import build_federated_data
from tests.helpers.runs import run_cli
from tests.helpers.writes import MALICIOUS_SMALL as SMALL


def _alone(run) -> set[int]:
    """The round's samples alone in one of the block's upper intervals."""
    scenario = from_toml((run / "scenario.toml").read_text())
    data = build_federated_data(scenario)
    m = data.x[data.test].reshape(len(data.test), -1).astype(np.float64).mean(axis=1)
    c = gaussian_thresholds(float(m.mean()), float(m.std()), scenario.stages["imprint"]["bins"])
    ids = np.concatenate(data.clients)
    idx = np.searchsorted(c, data.x[ids].reshape(len(ids), -1).astype(np.float64).mean(axis=1))
    counts = np.bincount(idx, minlength=len(c) + 1)
    return {int(i) for i, j in zip(ids, idx) if j > 0 and counts[j] == 1}


def _recovered(run) -> set[int]:
    rows = np.load(run / "imprint.npz")
    return {int(i) for i, p in zip(rows["true_id"], rows["psnr"]) if p >= 40.0}


def test_the_malicious_server_reads_the_lone_samples_with_and_without_secagg(
        tmp_path, malicious_secagg_run):
    """Plain FedAvg through the command line; SecAgg+ is the session's shared run
    (tests/e2e/conftest.py), which the stage-writes test also checks."""
    _, plain = run_cli("malicious-server", tmp_path / "plain", SMALL)
    res = json.loads((plain / "results.json").read_text())["malicious_server"]
    assert res["aggregation"] == "plain" and res["samples"] == 16
    assert res["threat_model"]["position"] == "malicious server"
    alone = _alone(plain)
    assert alone and _recovered(plain) == alone
    assert res["near_exact"] == len(alone) and res["share"] == len(alone) / 16

    secure = malicious_secagg_run[0]
    res = json.loads((secure / "results.json").read_text())["malicious_server"]
    assert res["aggregation"] == "secagg+"
    got = _recovered(secure)
    assert got and got <= _alone(secure)  # SecAgg+'s rounding may cost some, never adds
