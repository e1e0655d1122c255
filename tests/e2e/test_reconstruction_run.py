"""What the server rebuilds from an update, end to end through Flower + Ray: the digits
scenario (4 clients of one batch of 4, one SGD step), the client-updates probe's files,
results.json label_leakage and reconstruction, reconstructions.npz (every PSNR recomputed
from its images; one client's job recomputed in this process gives the images the run's
Ray actor gave), the console lines and the report's section."""

import json

import numpy as np

from fedaudit.audit.update_attacks import run_update_job
from tests.helpers.runs import run_cli


def _job_of(run, client: int):
    """The run's reconstruction job of ``client`` in round 1, rebuilt from its files."""
    from fedaudit.audit.stages.update_attacks import update_jobs
    from fedaudit.config import from_toml
    from fedaudit.data import build_federated_data

    scenario = from_toml((run / "scenario.toml").read_text())
    jobs, _ = update_jobs(scenario, build_federated_data(scenario), run)
    return next(j for j in jobs if j.client == client and j.round == 1
                and j.family == "reconstruction")


def test_reconstruction_end_to_end(tmp_path):
    proc, run = run_cli("reconstruction-digits", tmp_path, ["reconstruction.iterations=60"])
    res = json.loads((run / "results.json").read_text())
    # the probe kept round 1's start model and the 4 clients' models as received
    kept = sorted(p.name for p in (run / "updates" / "round-0001").iterdir())
    assert kept == ["client-0000.pt", "client-0001.pt", "client-0002.pt", "client-0003.pt",
                    "clients.npz", "start.pt"]
    assert not (run / ".update-job-progress").exists()  # the jobs' heartbeats are cleaned up
    labels = res["label_leakage"]
    assert labels["methods"] == ["bias-count", "llg"] and len(labels["cases"]) == 4
    for case in labels["cases"]:
        assert case["num_examples"] == 4
        for m in ("bias-count", "llg"):
            assert 0.0 <= case[m]["label_accuracy"] <= 1.0 and case[m]["count_error"] >= 0
    rec = res["reconstruction"]
    assert rec["threat_model"]["position"] == "honest-but-curious server"
    assert rec["labels_from"] == "the guess of bias-count"
    assert rec["budget"]["iterations"] == 60 and rec["ssim_window"] == 7
    rows = np.load(run / "reconstructions.npz")
    assert rows["image"].shape == (16, 1, 8, 8) == rows["true_image"].shape
    assert sorted(set(rows["client"].tolist())) == [0, 1, 2, 3]
    # anyone can recompute every PSNR from the file: 10 log10(1 / MSE) on [0, 1] images
    mse = ((rows["image"].astype(np.float64) - rows["true_image"]) ** 2).mean(axis=(1, 2, 3))
    np.testing.assert_allclose(rows["psnr"], 10 * np.log10(1.0 / mse), rtol=1e-12)
    pooled = rec["pooled"]["inverting-gradients"]
    assert pooled["samples"] == 16
    finite = np.isfinite(rows["psnr"])
    assert pooled["psnr"] == np.mean(rows["psnr"][finite])
    assert pooled["exact"] == int((~finite).sum())
    assert pooled["ssim"] == np.mean(rows["ssim"])
    for case in rec["cases"]:
        mine = rows["client"] == case["client"]
        assert case["inverting-gradients"]["ssim"] == np.mean(rows["ssim"][mine])
    # the jobs ran on the run's Ray actors (update_attacks.runtime auto = grid in simulation);
    # each with one thread and its own seed, so this process gives the same images
    assert rec["cache"]["from_cache"] == 0
    assert rec["ran_on"] == "the run's Ray actors (Flower's simulation grid)"
    again = run_update_job(_job_of(run, 2)).outputs["inverting-gradients"]
    mine = (rows["client"] == 2) & (rows["method"] == "inverting-gradients")
    np.testing.assert_array_equal(rows["label"][mine], again.labels)
    np.testing.assert_array_equal(rows["image"][mine], again.images)
    assert "label leakage from 4 updates: label accuracy bias-count" in proc.stdout + proc.stderr
    assert "reconstruction from the updates: inverting-gradients: PSNR" in \
        proc.stdout + proc.stderr
    html = (run / "report.html").read_text()
    assert '<section id="update-attacks">' in html
    assert '<figure id="fig-reconstruction_pictures"><img' in html
    assert '<figure id="fig-reconstruction_leakage"><img' in html
