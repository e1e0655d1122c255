"""Local training and evaluation loops in plain torch."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def pick_device(preference: str = "auto") -> torch.device:
    """``auto``: CUDA when present, else CPU."""
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("train.device = 'cuda' but torch sees no CUDA device")
        return torch.device("cuda")
    return torch.device("cpu")


def make_optimizer(model: nn.Module, cfg: dict) -> torch.optim.Optimizer:
    if cfg["optimizer"] == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    return torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"],
                           weight_decay=cfg["weight_decay"])


@dataclass
class TrainResult:
    loss: float  # mean training loss over the local steps
    num_examples: int
    steps: int
    gnq_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gnq_scores: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))


def train_local(model: nn.Module, x: np.ndarray, y: np.ndarray, ids: np.ndarray, cfg: dict,
                *, seed: int, device: torch.device, gnq: dict | None = None) -> TrainResult:
    """Train ``model`` in place on samples ``ids`` for ``cfg['local_epochs']`` epochs.

    With ``gnq`` (the ``[audit.gnq]`` table) every batch is also scored with in-run ghost
    GNQ: the hooks observe the ordinary backward pass, so the update is unchanged.
    """
    model.to(device).train()
    opt = make_optimizer(model, cfg)
    gen = torch.Generator().manual_seed(seed)
    xs = torch.from_numpy(np.ascontiguousarray(x[ids])).to(device)
    ys = torch.from_numpy(np.ascontiguousarray(y[ids])).to(device)
    auditor = None
    if gnq is not None:
        from fedaudit.gnq import GhostAuditor

        auditor = GhostAuditor(model, lam=gnq["lam"], lam_mode=gnq["lam_mode"], rho=gnq["rho"],
                               loss_reduction="mean")
    total, steps = 0.0, 0
    gnq_ids, gnq_scores = [], []
    n = len(ids)
    for _ in range(cfg["local_epochs"]):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, cfg["batch_size"]):
            idx = order[start:start + cfg["batch_size"]]
            xb, yb = xs[idx.to(device)], ys[idx.to(device)]
            opt.zero_grad(set_to_none=True)
            if auditor is not None:
                with auditor.capture():
                    loss = F.cross_entropy(model(xb), yb)
                    loss.backward()
                gnq_scores.append(auditor.scores().cpu().numpy())
                gnq_ids.append(ids[idx.numpy()])
            else:
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
            opt.step()
            total += float(loss.detach())
            steps += 1
    res = TrainResult(total / max(steps, 1), n, steps)
    if gnq_ids:
        res.gnq_ids = np.concatenate(gnq_ids).astype(np.int64)
        res.gnq_scores = np.concatenate(gnq_scores).astype(np.float64)
    return res


@torch.inference_mode()
def per_sample_losses(model: nn.Module, x: np.ndarray, y: np.ndarray, *,
                      device: torch.device, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample cross-entropy losses (float64) and correctness (bool) in eval mode."""
    model.to(device).eval()
    losses, correct = [], []
    for start in range(0, len(y), batch_size):
        xb = torch.from_numpy(np.ascontiguousarray(x[start:start + batch_size])).to(device)
        yb = torch.from_numpy(np.ascontiguousarray(y[start:start + batch_size])).to(device)
        out = model(xb)
        losses.append(F.cross_entropy(out.double(), yb, reduction="none").cpu().numpy())
        correct.append((out.argmax(1) == yb).cpu().numpy())
    return np.concatenate(losses), np.concatenate(correct)


def evaluate(model: nn.Module, x: np.ndarray, y: np.ndarray, *, device: torch.device,
             batch_size: int = 1024) -> tuple[float, float]:
    """(accuracy, mean cross-entropy loss)."""
    losses, correct = per_sample_losses(model, x, y, device=device, batch_size=batch_size)
    return float(correct.mean()), float(losses.mean())
