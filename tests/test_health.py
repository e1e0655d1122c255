"""The chance-level warning: hand-computed bounds, and a run that cannot learn (lr = 10)."""

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from fedaudit.config import validate
from fedaudit.training.health import chance_level, chance_level_warning

TRAIN = dataclasses.replace(validate({}).train, lr=10.0, momentum=0.9, optimizer="sgd")


def test_chance_level_is_the_majority_class_plus_three_standard_errors():
    y = np.array([0] * 50 + [1] * 30 + [2] * 20)  # p0 = 0.5, n = 100
    level = chance_level(y)
    assert level.chance == 0.5
    assert level.bound == pytest.approx(0.5 + 3 * math.sqrt(0.25 / 100))  # 0.65
    with pytest.raises(ValueError, match="non-empty 1-D"):
        chance_level(np.array([], dtype=int))


def test_warning_only_from_round_3_and_only_at_chance():
    y = np.array([0] * 50 + [1] * 30 + [2] * 20)
    assert chance_level_warning(2, 10, 0.5, y, TRAIN) is None  # too early
    msg = chance_level_warning(3, 10, 0.5, y, TRAIN, failures=2)
    assert "chance level after round 3" in msg and "train.lr = 10" in msg
    assert "train.momentum = 0.9" in msg and "2 client replies were rejected" in msg
    assert chance_level_warning(3, 10, 0.65, y, TRAIN) is not None  # at the bound
    assert chance_level_warning(3, 10, 0.66, y, TRAIN) is None  # above it
    assert chance_level_warning(3, 10, float("nan"), y, TRAIN) is not None
    assert chance_level_warning(1, 1, 0.5, y, TRAIN) is not None  # a 1-round run: its last
    assert "(adam)" in chance_level_warning(3, 5, 0.5, y, dataclasses.replace(TRAIN, optimizer="adam"))


@pytest.mark.e2e
def test_a_run_with_lr_10_warns_on_console_log_results_and_report(tmp_path):
    sets = ["federation.num_clients=2", "federation.rounds=3", "train.lr=10",
            "audit.quantization.enabled=false", "attack.methods=['loss']",
            "audit.gnq.client=false"]
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "run", "quickstart", "--out",
                           str(tmp_path), *[a for s in sets for a in ("--set", s)]],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / proc.stdout.strip().splitlines()[-1]
    res = json.loads((run_dir / "results.json").read_text())
    assert res["model"]["test_accuracy"] < 0.2  # digits: 10 balanced classes
    assert len(res["warnings"]) == 1 and res["warnings"][0]["round"] == 3
    assert "train.lr = 10" in res["warnings"][0]["message"]
    assert "chance level" in " ".join(proc.stderr.split())
    assert "chance level" in (run_dir / "run.log").read_text()
    html = (run_dir / "report.html").read_text()
    assert html.index('class="warning"') < html.index("<nav>")  # at the top


@pytest.mark.e2e
def test_a_learning_run_has_no_warning(tmp_path):
    sets = ["federation.num_clients=2", "federation.rounds=3", "audit.quantization.enabled=false",
            "attack.enabled=false", "audit.gnq.client=false"]
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "run", "quickstart", "--out",
                           str(tmp_path), "--no-report", *[a for s in sets for a in ("--set", s)]],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / proc.stdout.strip().splitlines()[-1] / "results.json").read_text())
    assert res["model"]["test_accuracy"] > 0.5 and res["warnings"] == []
