"""The update-attacks stage's own checks (one line each, before training), where its jobs
compute (``update_attacks.device``), and the keys that moved to their own tables (issue 48:
one line naming the new place)."""

import pytest
import torch

from fedaudit.audit.stages.update_attacks import job_device
from fedaudit.config import load_scenario
from fedaudit.errors import ScenarioError


@pytest.mark.parametrize("overrides, message", [
    (["label_leakage.methods=[]", "label_leakage.enabled=false"],
     "reconstruction.labels = 'guess' needs a label attack: list one in "
     "label_leakage.methods"),
    (["reconstruction.methods=[]"],
     "reconstruction.enabled = true lists no attack in reconstruction.methods"),
    (["label_leakage.methods=[]"],
     "label_leakage.enabled = true lists no attack in label_leakage.methods"),
    (["label_leakage.clients=[0, 9]"],
     r"label_leakage.clients = \[0, 9\]: client 9 does not exist; allowed: 0..3"),
    (["reconstruction.clients=[4]"],
     r"reconstruction.clients = \[4\]: client 4 does not exist; allowed: 0..3"),
    (["reconstruction.rounds=[2]"],
     r"reconstruction.rounds = \[2\]: round 2 does not exist; allowed: 1..1"),
    (["update_attacks.device=cuda"],
     "update_attacks.device = 'cuda' runs the jobs on the Ray actors, which need "
     r"federation.client_resources.num_gpus > 0"),
    (["update_attacks.device=gpu"], "update_attacks.device"),
    (["reconstruction.label_methods=['llg']"],
     r"reconstruction.label_methods moved to label_leakage.methods \(with \[label_leakage\] "
     r"enabled = true\)"),
    (["reconstruction.runtime=grid"], "reconstruction.runtime moved to update_attacks.runtime"),
    (["reconstruction.device=cpu"], "reconstruction.device moved to update_attacks.device"),
])
def test_bad_reconstruction_tables_are_refused_in_one_line(overrides, message):
    with pytest.raises(ScenarioError, match=message) as err:
        load_scenario("reconstruction-digits", overrides)
    assert "\n" not in str(err.value)


def test_cuda_in_the_driver_needs_no_actor_gpus():
    s = load_scenario("reconstruction-digits", ["update_attacks.device=cuda",
                                                "update_attacks.runtime=driver"])
    assert job_device(s, on_actors=False) == "cuda"


@pytest.mark.parametrize("gpu, num_gpus, on_actors, expected", [
    (False, 0.0, True, "cpu"),
    (False, 0.5, True, "cpu"),    # no GPU in this process: the actors have none either
    (True, 0.0, True, "cpu"),     # Ray hides the GPU from actors that asked for none
    (True, 0.25, True, "cuda"),
    (True, 0.0, False, "cuda"),   # the jobs run in this process, which has one
    (False, 0.0, False, "cpu"),
])
def test_auto_picks_the_gpu_only_where_the_jobs_run_with_one(monkeypatch, gpu, num_gpus,
                                                             on_actors, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    s = load_scenario("reconstruction-digits",
                      [f"federation.client_resources.num_gpus={num_gpus}"])
    assert job_device(s, on_actors=on_actors) == expected


def test_an_explicit_device_is_kept():
    s = load_scenario("reconstruction-digits", ["update_attacks.device=cpu"])
    assert job_device(s, on_actors=True) == "cpu"


def test_pooled_label_leakage_is_clustered_by_client_and_judged_on_the_worst():
    """Four clients of 4 samples of 4 distinct classes out of 10 (uniform prior: the
    data-free guess is classes 0-3), each guessed exactly.  Client 0 holds 0-3 (the guess
    is the data-free one: d = 0), client 1 holds 4-7 (d = 4 - 0), clients 2 and 3 hold
    8, 9, 0, 1 and 2-5 (d = 4 - 2).  Shares 16/16 and 8/16; the difference's cluster
    totals (0, 4, 2, 2) over 4 samples each give theta = 1/2, Var = 4/3 (2^2 + 2^2) / 16^2
    on 3 df.  No overdispersion (X^2 = 24 < K (C - 1) = 36).  Client 1's labels are 4
    given distinct classes with probability 4! / 10^4 = 0.0024 under the prior: times 5
    for Holm, 0.012, a leak."""
    import numpy as np
    from scipy.stats import t

    from attacks.label_leakage.baseline import LabelCase, data_free_guess
    from attacks.label_leakage.family import pooled_labels as _pooled_labels

    prior = np.full(10, 0.1)
    base = data_free_guess(4, prior)
    held = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    cases = []
    for k, classes in enumerate(held):
        true = np.bincount(classes, minlength=10)
        cases.append(LabelCase(k, true.copy(), base, true))
    out = _pooled_labels(cases, prior)
    assert (out["labels"], out["labels_recovered"], out["chance_recovered"]) == (16, 16, 8)
    assert out["label_accuracy"] == 1.0 and out["count_error"] == 0.0
    assert out["chance_accuracy"] == 0.5 and out["difference"] == 0.5
    assert out["overdispersion"] == 0.0
    half = t.ppf(0.975, 3) * np.sqrt(4 / 3 * 8 / 256)
    assert out["difference_ci"] == pytest.approx([0.5 - half, 1.0])  # cut at 1
    d = out["verdict_detail"]
    assert out["verdict"] == "leaks" and d["tests"] == 5
    worst = d["worst_client"]
    assert worst["scope"] == "client 1" and worst["p_adjusted"] < 0.025
    # Monte Carlo: within 5 standard errors of 0.0024
    assert abs(worst["p_above"] - 0.0024) < 5 * np.sqrt(0.0024 / 20000) + 1 / 20000
    assert d["clients"] == 4 and d["leaking_clients"] >= 1
    assert _pooled_labels([], prior) == {"label_accuracy": None, "count_error": None,
                                         "cases": 0}


def test_an_old_scenario_file_gets_one_line_saying_what_moved(tmp_path):
    from fedaudit.config import from_toml

    with pytest.raises(ScenarioError, match="reconstruction.label_methods moved to "
                                            "label_leakage.methods") as err:
        from_toml("[reconstruction]\nenabled = true\nlabel_methods = ['llg']\n", "old.toml")
    assert "\n" not in str(err.value) and str(err.value).startswith("old.toml: ")
