"""A text scenario end to end through the real Flower simulation runtime on Ray: a small
generated play, one client per role, the transformer trained with client- and
server-side GNQ per sequence, post-training quantization with r_Qn, LOSS and zlib on the
global and quantized models, the report."""

import json
import subprocess
import sys

import numpy as np

from tests.helpers.paths import ROOT
from tests.helpers.plays import write_play
from tests.helpers.runs import run_cli


TINY = ["federation.num_clients=3", "federation.rounds=2", "train.local_epochs=1",
        "data.seq_len=32", "data.min_role_sequences=4", "attack.members_per_client=8",
        "audit.quantization.quantizers=['fp32', 'int4']"]


def test_text_scenario_runs_end_to_end(tmp_path):
    play = write_play(tmp_path / "play.txt")
    _, run = run_cli("shakespeare-small", tmp_path, [f"data.path={play}", *TINY])
    res = json.loads((run / "results.json").read_text())

    assert res["data"]["shape"] == [32] and res["data"]["text"]["seq_len"] == 32
    assert [r["round"] for r in res["rounds"]] == [1, 2]
    # per-token accuracy and mean token NLL of a model that learned something
    acc, loss = res["model"]["test_accuracy"], res["model"]["test_loss"]
    assert 0 < acc < 1 and 0 < loss < np.log(res["data"]["num_classes"])
    assert set(res["attacks"]) == {"loss", "zlib"}
    for m in ("loss", "zlib"):
        assert 0 <= res["attacks"][m]["auc"] <= 1 and res["attacks"][m]["queries_per_sample"] == 1
    roles = [list(c["roles"]) for c in res["clients"]]  # speaker: one role per client
    assert all(len(r) == 1 for r in roles) and len({r[0] for r in roles}) == 3
    assert {r[0] for r in roles} <= {"ANNA", "BORIS", "CLARA", "DMITRI"}
    for c in res["clients"]:
        assert len(c["gnq"]["update_per_round"]) == 2 and c["gnq"]["sample_mean"] > 0
        assert set(c["attacks"]) == {"loss", "zlib"}
    assert [q["quantizer"] for q in res["quantization"]] == ["fp32", "int4"]
    assert all(q["rqn"] == "inf" or q["rqn"] > 0 for q in res["quantization"])
    assert set(res["quantization"][1]["attacks"]) == {"loss", "zlib"}

    with np.load(run / "gnq_samples.npz") as g:
        assert len(g["score"]) > 0 and np.isfinite(g["score"]).all()
    with np.load(run / "scores.npz") as s:
        assert set(s["method"]) == {"loss", "zlib"}
        assert set(s["target"]) == {"global", "quantized:fp32", "quantized:int4"}
        assert np.isfinite(s["score"]).all()
        zlib = s["score"][(s["method"] == "zlib") & (s["target"] == "global")]
        assert (zlib < 0).all()  # minus a perplexity over a positive entropy
        members = s["member"][(s["method"] == "loss") & (s["target"] == "global")]
        assert members.sum() == 3 * 8 and len(members) == 2 * 3 * 8
    assert (run / "report.html").is_file()

    # interrupted after round 1: --resume trains round 2 again and gives the same numbers
    first = (run / "rounds.jsonl").read_text().splitlines()[0] + "\n"
    (run / "rounds.jsonl").write_text(first)
    for name in ("results.json", "scores.npz", "report.html"):
        (run / name).unlink()
    for path in (run / "checkpoints").glob("*-0002.*"):
        path.unlink()
    again = subprocess.run([sys.executable, "-m", "fedaudit.cli", "run", "--resume", str(run),
                            "--no-report"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = json.loads((run / "results.json").read_text())
    assert resumed["model"] == res["model"]

    def metrics(r):  # without the seconds an attack took
        return {m: {k: v for k, v in a.items() if k != "seconds_per_sample"}
                for m, a in r["attacks"].items()}

    assert metrics(resumed) == metrics(res)


def test_reference_attacks_on_text_end_to_end(tmp_path):
    """LiRA and RMIA with reference federations trained like the target (whole speeches
    per client), FedMIA on the clients' models: each sequence scored by its geometric-mean
    target probability (attacks.membership.sequences)."""
    play = write_play(tmp_path / "play.txt")
    _, run = run_cli("shakespeare-small", tmp_path,
                     [f"data.path={play}", *TINY[1:], "federation.num_clients=4",
                      "audit.quantization.enabled=false",
                      "attack.methods=['loss', 'lira', 'rmia', 'fedmia']",
                      "attack.targets=['global', 'clients']", "attack.reference.models=2",
                      "attack.reference.allow_smaller=true", "attack.rmia.a=0.3"],
                     extra=("--no-report", "--cache", str(tmp_path / "cache")))
    res = json.loads((run / "results.json").read_text())
    assert set(res["attacks"]) == {"loss", "lira", "rmia"}
    assert res["attacks"]["lira"]["reference_models"] == 2
    assert all(0 <= res["attacks"][m]["auc"] <= 1 for m in res["attacks"])
    assert res["references"]["models"] == 2 and res["references"]["trained"] == 2
    assert 0 <= res["server_view"]["pooled"]["fedmia"]["auc"] <= 1
