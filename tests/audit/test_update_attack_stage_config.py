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


def test_pooled_label_leakage_has_the_samples_interval():
    """Two cases: 3 of 4 and 4 of 4 labels recovered -> the mean of the case accuracies
    (0.875), and 7 of 8 samples with Clopper-Pearson's interval on them."""
    from attacks.label_leakage.family import pooled_labels as _pooled_labels
    from fedaudit.intervals import clopper_pearson

    out = _pooled_labels([(0.75, 2, 3, 4, 1.25), (1.0, 0, 4, 4, 0.75)])
    ci = clopper_pearson(7, 8)  # [0.473, 0.997]: above the chance level of 2 of 8
    assert out == {"label_accuracy": 0.875, "count_error": 1.0, "cases": 2, "labels": 8,
                   "labels_recovered": 7, "label_accuracy_ci": list(ci),
                   "chance_accuracy": 0.25, "verdict": "above chance"}
    assert _pooled_labels([]) == {"label_accuracy": None, "count_error": None, "cases": 0}


def test_an_old_scenario_file_gets_one_line_saying_what_moved(tmp_path):
    from fedaudit.config import from_toml

    with pytest.raises(ScenarioError, match="reconstruction.label_methods moved to "
                                            "label_leakage.methods") as err:
        from_toml("[reconstruction]\nenabled = true\nlabel_methods = ['llg']\n", "old.toml")
    assert "\n" not in str(err.value) and str(err.value).startswith("old.toml: ")
