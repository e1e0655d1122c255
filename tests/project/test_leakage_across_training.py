"""experiments/leakage_across_training.py: one row per attacked round, from hand-made
results.json and reconstructions.npz (the start model's accuracy is the round before's, the
label share counts the reconstructed clients only, the interval is mean +- 1.96 sd /
sqrt(n))."""

import importlib.util
import json

import numpy as np
import pytest

from tests.helpers.paths import ROOT

spec = importlib.util.spec_from_file_location(
    "leakage_across_training", ROOT / "experiments" / "leakage_across_training.py")
across = importlib.util.module_from_spec(spec)
spec.loader.exec_module(across)


def test_the_table_reads_the_run(tmp_path):
    results = {
        "rounds": [{"round": 1, "test_accuracy": 0.3}, {"round": 2, "test_accuracy": 0.4}],
        "label_leakage": {"methods": ["bias-count"], "cases": [
            {"client": 0, "round": 2, "num_examples": 4, "bias-count": {"label_accuracy": 0.5}},
            {"client": 1, "round": 2, "num_examples": 2, "bias-count": {"label_accuracy": 1.0}},
            # a client not reconstructed (too many samples): not counted
            {"client": 5, "round": 2, "num_examples": 500,
             "bias-count": {"label_accuracy": 0.0}}]}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    results["reconstruction"] = {"methods": ["inverting-gradients", "dlg"]}
    # the last row is the second method's: left out
    np.savez(tmp_path / "reconstructions.npz",
             round=np.array([1, 1, 2, 2, 2, 2]), client=np.array([0, 1, 0, 0, 1, 1]),
             method=np.array(["inverting-gradients"] * 5 + ["dlg"]),
             psnr=np.array([10.0, np.inf, 20.0, 22.0, 24.0, 5.0]),
             ssim=np.array([0.2, 0.4, 0.5, 0.7, 0.9, 0.0]),
             prior_ssim=np.array([0.1, 0.1, 0.1, 0.1, 0.1, 0.1]),
             label_correct=np.array([True, False, True, True, False, False]))
    (tmp_path / "results.json").write_text(json.dumps(results))
    rows = across.table(tmp_path)
    assert [r["round"] for r in rows] == [1, 2]
    first, second = rows
    assert first["start_test_accuracy"] is None and second["start_test_accuracy"] == 0.3
    assert first["psnr"] == 10.0  # the exact reconstruction's inf is left out of the mean
    assert second["samples"] == 3 and second["psnr"] == pytest.approx(22.0)
    assert second["ssim_gain"] == pytest.approx(0.6)
    half = 1.959963984540054 * 0.2 / np.sqrt(3)  # sd of (0.4, 0.6, 0.8) is 0.2
    assert second["ssim_gain_ci"] == pytest.approx([0.6 - half, 0.6 + half])
    assert second["label_accuracy_rec"] == pytest.approx(2 / 3)
    assert second["label_accuracy_guess"] == pytest.approx((0.5 * 4 + 1.0 * 2) / 6)
    assert first["label_accuracy_guess"] is None  # no label leakage case in round 1
