"""How well do the gradient-inversion attacks rebuild a client's digits from its update?
(docs/algorithms.md, "Gradient inversion")

For each batch size B and each of ``--clients`` disjoint groups of B digits (scikit-learn's
bundled 8x8 images in [0, 1]), a client trains an untrained fedaudit model on its B
samples with the real local training (:func:`fedaudit.training.train_local`: SGD, lr
``--lr``, no momentum, ``--epochs`` epochs of batches of ``--client-batch`` -- default B:
one step per epoch, a single gradient when ``--epochs 1``); the attack gets the
:class:`attacks.update_case.UpdateCase` (start model, update, recipe) and the true labels
(``--labels true``) or none (``joint``), and rebuilds B images.  Quality: PSNR of each
reconstruction against the true image it is matched to by an optimal assignment on MSE
(``scipy.optimize.linear_sum_assignment``; a local helper, not fedaudit.image_metrics),
PSNR = 10 log10(1 / MSE).  Prints one row per (attack, B): mean, min and max PSNR over
the samples of all clients, and seconds per (client, round) job.

    python experiments/reconstruction_digits.py --model mlp --attack inverting-gradients \\
        --iterations 100 --batches 1 4 8 --clients 10
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np


def digits() -> tuple[np.ndarray, np.ndarray]:
    """The bundled digits as fedaudit's ``digits`` dataset holds them: (N, 1, 8, 8) in [0, 1]."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images.astype(np.float32) / 16.0)[:, None], d.target.astype(np.int64)


def client_case(model, x: np.ndarray, y: np.ndarray, ids: np.ndarray, *, lr: float,
                epochs: int, batch: int, momentum: float = 0.0, seed: int = 0):
    """Train a copy of ``model`` on samples ``ids`` as a fedaudit client does and return the
    server's :class:`~attacks.update_case.UpdateCase` of it."""
    import torch

    from attacks.update_case import LocalTraining, UpdateCase
    from fedaudit.scenario import TrainConfig
    from fedaudit.training import train_local
    from fedaudit.training.losses import batch_loss

    cfg = TrainConfig(local_epochs=epochs, batch_size=batch, optimizer="sgd", lr=lr,
                      momentum=momentum, weight_decay=0.0, device="cpu")
    client = copy.deepcopy(model)
    start = {k: v.detach().clone() for k, v in client.state_dict().items()}
    train_local(client, x, y, ids, cfg, seed=seed, device=torch.device("cpu"))
    update = {k: (client.state_dict()[k] - start[k]).double() for k in start}
    training = LocalTraining(lr, momentum, 0.0, "sgd", epochs, batch, len(ids))
    return UpdateCase(copy.deepcopy(model), start, update, training, tuple(x.shape[1:]),
                      int(y.max()) + 1, (0.0, 1.0), batch_loss)


def matched_psnr(rec: np.ndarray, true: np.ndarray) -> np.ndarray:
    """PSNR (data range 1) of each true image against the reconstruction an optimal
    assignment on MSE gives it."""
    from scipy.optimize import linear_sum_assignment

    mse = ((rec[:, None] - true[None]) ** 2).reshape(len(rec), len(true), -1).mean(-1)
    r, c = linear_sum_assignment(mse)
    return 10 * np.log10(1.0 / np.maximum(mse[r, c], 1e-20))


def main() -> None:
    import torch

    from attacks.reconstruction import Budget, get_reconstruction
    from fedaudit.models import build_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp", help="a fedaudit image model")
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--attack", nargs="+", default=["inverting-gradients", "dlg"])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--clients", type=int, default=10, help="clients (groups of B digits)")
    ap.add_argument("--epochs", type=int, default=1, help="local epochs")
    ap.add_argument("--client-batch", type=int, default=0,
                    help="the client's batch size (0: B, one step per epoch)")
    ap.add_argument("--lr", type=float, default=0.1, help="the client's learning rate")
    ap.add_argument("--labels", choices=("true", "joint"), default="true")
    ap.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                    help="an option of the attack(s) (a Python literal), e.g. tv=0.0")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import ast

    options = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}
    x, y = digits()
    model = build_model(args.model, in_channels=1, image_size=8, num_classes=10,
                        width=args.width, seed=0)
    print(f"{args.model} (width {args.width}), {args.iterations} iterations x "
          f"{args.restarts} restarts, {args.epochs} local epoch(s), labels {args.labels}, "
          f"options {options or 'default'}, {torch.get_num_threads()} thread(s)")
    print("| attack | B | local steps | mean PSNR dB | min | max | s per job |")
    print("|---|---|---|---|---|---|---|")
    for attack in args.attack:
        fn = get_reconstruction(attack)
        for B in args.batches:
            psnr, seconds = [], []
            for k in range(args.clients):
                ids = np.arange(k * B, (k + 1) * B)
                case = client_case(model, x, y, ids, lr=args.lr, epochs=args.epochs,
                                   batch=args.client_batch or B, seed=k)
                t0 = time.perf_counter()
                rec = fn(case, num_samples=B,
                         labels=y[ids] if args.labels == "true" else None,
                         budget=Budget(args.iterations, args.restarts), seed=k, **options)
                seconds.append(time.perf_counter() - t0)
                psnr.append(matched_psnr(rec.images, x[ids]))
            p = np.concatenate(psnr)
            print(f"| {attack} | {B} | {case.training.steps} | {p.mean():.1f} | {p.min():.1f} | "
                  f"{p.max():.1f} | {np.median(seconds):.2f} |")


if __name__ == "__main__":
    main()
