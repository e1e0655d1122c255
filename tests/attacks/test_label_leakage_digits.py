"""The label-leakage attacks on real client rounds: fedaudit's bundled digits, the
quickstart CNN and the MLP (untrained, seed 0), updates made by
:func:`fedaudit.training.train_local` -- one SGD step on a batch of N = 1, 4, 8, and
multi-step rounds.  The thresholds sit below what experiments/label_leakage.py measures
(docs/algorithms.md section 13) and far above what a wrong sign, scale or step weighting
gives."""

import numpy as np
import pytest
import torch

from attacks.label_leakage import get_label_attack, label_accuracy, label_counts
from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.data import load_dataset
from fedaudit.models import build_model
from fedaudit.scenario import DataConfig, TrainConfig
from fedaudit.training.local import train_local
from fedaudit.training.losses import batch_loss

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def digits():
    return load_dataset(DataConfig())


def client_case(model_name, data, ids, *, batch_size, epochs=1, momentum=0.0, seed=0):
    model = build_model(model_name, in_channels=1, image_size=8, num_classes=10, seed=0)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    cfg = TrainConfig(local_epochs=epochs, batch_size=batch_size, lr=0.05, momentum=momentum)
    train_local(model, data.x, data.y, ids, cfg, seed=seed, device=CPU)
    update = {k: model.state_dict()[k].double() - start[k].double() for k in start}
    training = LocalTraining(cfg.lr, cfg.momentum, cfg.weight_decay, cfg.optimizer, epochs,
                             batch_size, len(ids))
    return UpdateCase(model, start, update, training, (1, 8, 8), 10, (0.0, 1.0), batch_loss)


@pytest.mark.parametrize("model_name", ["cnn", "mlp"])
def test_idlg_reads_every_digit_of_a_one_sample_step(digits, model_name):
    ids = np.array([int(np.flatnonzero(digits.y == c)[0]) for c in range(10)])
    for i in ids:
        case = client_case(model_name, digits, np.array([i]), batch_size=1)
        guess = get_label_attack("idlg")(case)
        assert guess.labels().tolist() == [int(digits.y[i])]
        assert guess.info["negative_rows"] == 1


@pytest.mark.parametrize("model_name", ["cnn", "mlp"])
@pytest.mark.parametrize("n", [4, 8])
def test_batch_counts_of_a_one_step_update(digits, model_name, n):
    """Untrained models: every client's multiset exact from the bias (raw counts within
    0.25 of the truth; measured at most 0.13), at least 95% from the others (measured:
    all exact); LLG exact at N = 4 (its impact read from the negative rows alone errs as
    N nears C: at N = 8 measured 0.84 (CNN) and 1.0 (MLP) on these clients)."""
    rng = np.random.default_rng(n)
    found = {a: [] for a in ("bias-count", "geng", "llg-star", "llg")}
    for r in range(10):
        ids = rng.choice(len(digits.y), n, replace=False)
        case = client_case(model_name, digits, ids, batch_size=n, seed=r)
        true = label_counts(digits.y[ids], 10)
        for a in found:
            guess = get_label_attack(a)(case)
            found[a].append(label_accuracy(guess.counts, true))
            if a == "bias-count":
                assert np.abs(np.array(guess.info["raw_counts"]) - true).max() < 0.25
    assert min(found["bias-count"]) == 1.0
    assert np.mean(found["geng"]) >= 0.95 and np.mean(found["llg-star"]) >= 0.95
    if n == 4:
        assert min(found["llg"]) == 1.0


@pytest.mark.parametrize("model_name, epochs, momentum, floor", [
    ("mlp", 2, 0.9, 0.95), ("cnn", 1, 0.0, 0.8)])
def test_batch_counts_of_a_multi_step_update(digits, model_name, epochs, momentum, floor):
    """16 digits, batches of 4 (4 steps an epoch): the step-average reading; measured mean
    accuracies on these 10 clients 0.99 (MLP, 2 epochs, momentum 0.9) and 0.89 (CNN,
    1 epoch); 1.0 and 0.88 over experiments/label_leakage.py's 20 clients."""
    rng = np.random.default_rng(16)
    acc = []
    for r in range(10):
        ids = rng.choice(len(digits.y), 16, replace=False)
        case = client_case(model_name, digits, ids, batch_size=4, epochs=epochs,
                           momentum=momentum, seed=r)
        assert case.training.steps == 4 * epochs
        guess = get_label_attack("bias-count")(case)
        acc.append(label_accuracy(guess.counts, label_counts(digits.y[ids], 10)))
    assert np.mean(acc) >= floor
