"""The chance-level warning in a run (Flower + Ray): a run that cannot learn (lr = 10) warns
on the console, in run.log, results.json and the report; a learning run does not."""

import json
import subprocess
import sys


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


def test_a_learning_run_has_no_warning(tmp_path):
    sets = ["federation.num_clients=2", "federation.rounds=3", "audit.quantization.enabled=false",
            "attack.enabled=false", "audit.gnq.client=false"]
    proc = subprocess.run([sys.executable, "-m", "fedaudit.cli", "run", "quickstart", "--out",
                           str(tmp_path), "--no-report", *[a for s in sets for a in ("--set", s)]],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / proc.stdout.strip().splitlines()[-1] / "results.json").read_text())
    assert res["model"]["test_accuracy"] > 0.5 and res["warnings"] == []
