"""Label leakage from real client updates on the bundled digits: the table of
docs/algorithms.md section 13.

    python experiments/label_leakage.py [--repeats 20]

For each model (the quickstart CNN and the MLP, width 16, seed 0), untrained and trained
(5 epochs of SGD on 1,000 other digits, lr 0.05, batch 32), and each kind of update, the
client is ``--repeats`` random sets of N digits (uniform over the 1,797, so the labels are
IID) that train one round with :func:`fedaudit.training.train_local` from the same start
model: one SGD step on a batch of N (N = 1, 4, 8, 32), or several local steps
(N, batch b, epochs E, momentum mu; lr 0.05 throughout).  Each cell is the mean label
accuracy (multiset overlap) of each attack, with its defaults, over the clients; then
``bias-count`` without its sign floor (``negative_present=False``) and the count error of
``bias-count``.  One thread; about 20 seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from attacks.label_leakage import (get_label_attack, label_accuracy, label_attack_names,
                                   label_counts)
from attacks.label_leakage.registry import count_error, label_attack_label
from attacks.update_case import LocalTraining, UpdateCase
from fedaudit.data import load_dataset
from fedaudit.models import build_model
from fedaudit.scenario import DataConfig, TrainConfig
from fedaudit.training.local import evaluate, train_local
from fedaudit.training.losses import batch_loss

CPU = torch.device("cpu")
#: (N, batch size, local epochs, momentum): one step when batch size == N and one epoch
UPDATES = [(1, 1, 1, 0.0), (4, 4, 1, 0.0), (8, 8, 1, 0.0), (32, 32, 1, 0.0),
           (16, 4, 1, 0.0), (16, 4, 2, 0.9), (32, 8, 5, 0.9)]


def client_case(model_name: str, start: dict, x: np.ndarray, y: np.ndarray, ids: np.ndarray,
                cfg: TrainConfig, seed: int) -> UpdateCase:
    """One client's round from ``start`` on samples ``ids``, as the server holds it."""
    model = build_model(model_name, in_channels=1, image_size=8, num_classes=10)
    model.load_state_dict(start)
    train_local(model, x, y, ids, cfg, seed=seed, device=CPU)
    update = {k: model.state_dict()[k].double() - start[k].double() for k in start}
    training = LocalTraining(cfg.lr, cfg.momentum, cfg.weight_decay, cfg.optimizer,
                             cfg.local_epochs, cfg.batch_size, len(ids))
    return UpdateCase(model, start, update, training, (1, 8, 8), 10, (0.0, 1.0), batch_loss)


def start_models(model_name: str, x: np.ndarray, y: np.ndarray) -> dict[str, dict]:
    """The untrained model and the one trained on 1,000 digits (printing its accuracy on
    the other 797)."""
    model = build_model(model_name, in_channels=1, image_size=8, num_classes=10, seed=0)
    untrained = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ids = np.random.default_rng(1).choice(len(y), 1000, replace=False)
    cfg = TrainConfig(local_epochs=5, batch_size=32, lr=0.05, momentum=0.0)
    train_local(model, x, y, ids, cfg, seed=0, device=CPU)
    rest = np.setdiff1d(np.arange(len(y)), ids)
    accuracy, _ = evaluate(model, x[rest], y[rest], device=CPU)
    print(f"trained {model_name}: accuracy {accuracy:.3f} on the other {len(rest)} digits")
    return {"untrained": untrained,
            "trained": {k: v.detach().clone() for k, v in model.state_dict().items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_dataset(DataConfig())
    names = label_attack_names()
    t0 = time.perf_counter()
    head = " | ".join(label_attack_label(n) for n in names)
    starts = {m: start_models(m, data.x, data.y) for m in ("cnn", "mlp")}
    print(f"\n| model | start | N | b | E | mu | steps | {head} | bias counts, no floor "
          "| count error (bias counts) |")
    print("|" + "---|" * (9 + len(names)))
    for model_name in ("cnn", "mlp"):
        for state, start in starts[model_name].items():
            for n, b, epochs, mu in UPDATES:
                cfg = TrainConfig(local_epochs=epochs, batch_size=b, lr=0.05, momentum=mu)
                rng = np.random.default_rng([n, b, epochs])
                acc = {a: [] for a in names}
                errors, no_floor = [], []
                for r in range(args.repeats):
                    ids = rng.choice(len(data.y), n, replace=False)
                    case = client_case(model_name, start, data.x, data.y, ids, cfg, seed=r)
                    true = label_counts(data.y[ids], 10)
                    for a in names:
                        if a == "idlg" and n > 1:
                            continue
                        guess = get_label_attack(a)(case)
                        acc[a].append(label_accuracy(guess.counts, true))
                        if a == "bias-count":
                            errors.append(count_error(guess.counts, true))
                    guess = get_label_attack("bias-count")(case, negative_present=False)
                    no_floor.append(label_accuracy(guess.counts, true))
                cells = " | ".join(f"{np.mean(acc[a]):.3f}" if acc[a] else "--" for a in names)
                steps = case.training.steps
                print(f"| {model_name} | {state} | {n} | {b} | {epochs} | {mu} | {steps} | "
                      f"{cells} | {np.mean(no_floor):.3f} | {np.mean(errors):.2f} |", flush=True)
    print(f"\n{args.repeats} clients per row; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
