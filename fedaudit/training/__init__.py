"""The clients' local training (:mod:`~fedaudit.training.local`: plain and DP-SGD, with
in-run GNQ; evaluation and per-sample losses the server-side audit reuses) and the
chance-level check of a round (:mod:`~fedaudit.training.health`)."""

from fedaudit.training.local import (TrainResult, client_seed, dp_clipped_gnq, evaluate,
                                     make_optimizer, per_sample_losses, pick_device,
                                     train_local, train_local_dpsgd)

__all__ = ["TrainResult", "client_seed", "dp_clipped_gnq", "evaluate", "make_optimizer",
           "per_sample_losses", "pick_device", "train_local", "train_local_dpsgd"]
