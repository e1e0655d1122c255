"""What every gradient-inversion attack does around its optimiser: check the call, seed
each restart, hold the dummy labels (given, or soft labels optimised jointly), and keep
the restart of lowest final matching loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from attacks.reconstruction.registry import Budget, Reconstruction
from attacks.reconstruction.simulate import UpdateSimulator
from attacks.update_case import UpdateCase

__all__ = ["Trial", "budget_device", "check_call", "dummy_labels", "final_loss", "keep_best",
           "restart_generator"]


def check_call(name: str, case: UpdateCase, num_samples: Any, labels: Any, budget: Any,
               seed: Any, *, joint_labels: bool) -> tuple[UpdateSimulator, torch.Tensor | None]:
    """Validate an attack's arguments (one-line ``ValueError`` / ``TypeError`` naming the
    argument) and prepare the simulator; returns it and the given labels as an int64
    tensor (None: optimise them jointly, for an attack with ``joint_labels``)."""
    if not isinstance(case, UpdateCase):
        raise TypeError(f"{name}: case must be an attacks.update_case.UpdateCase, got "
                        f"{type(case).__name__}")
    if not isinstance(budget, Budget):
        raise TypeError(f"{name}: budget must be an attacks.reconstruction.Budget, got "
                        f"{type(budget).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name}: seed = {seed!r}: must be an integer >= 0")
    n = case.training.num_examples
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) \
            or num_samples != n:
        raise ValueError(f"{name}: num_samples = {num_samples!r}: must equal the samples the "
                         f"client trained on, training.num_examples = {n}")
    simulator = UpdateSimulator.of(case, budget_device(name, budget))
    if labels is None:
        if not joint_labels:
            raise ValueError(f"{name}: labels = None, but this attack does not optimise labels "
                             "jointly; give an (N,) array of class ids")
        _check_soft_loss(name, case)
        return simulator, None
    y = np.asarray(labels)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{name}: labels must be an integer array of shape ({n},), got "
                         f"{y.dtype} {y.shape}")
    bad = np.flatnonzero((y < 0) | (y >= case.num_classes))
    if len(bad):
        raise ValueError(f"{name}: labels[{bad[0]}] = {y[bad[0]]}: class ids must lie in "
                         f"0..{case.num_classes - 1}")
    return simulator, torch.from_numpy(y.astype(np.int64)).to(simulator.device)


def budget_device(name: str, budget: Budget) -> torch.device:
    """``budget.device`` as a torch device; ``ValueError`` when this process has no such
    CUDA device (a job sent to an actor without a GPU fails with this line)."""
    device = torch.device(budget.device)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ValueError(f"{name}: budget.device = {budget.device!r}, but this process "
                             f"sees {count} CUDA device(s)")
    return device


def _check_soft_loss(name: str, case: UpdateCase) -> None:
    """Joint labels replace the case's loss by the soft-label cross-entropy: refuse when the
    case's loss is not the mean cross-entropy (they differ on one-hot labels)."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(3, case.num_classes, generator=gen, dtype=torch.float64)
    y = torch.arange(3) % case.num_classes
    hard = case.loss(z, y)
    soft = F.cross_entropy(z, F.one_hot(y, case.num_classes).double())
    if not torch.isclose(hard, soft, rtol=1e-10, atol=0.0):
        raise ValueError(f"{name}: labels = None needs the case's loss to be the mean "
                         "cross-entropy (soft labels stand in for its labels); give labels")


def restart_generator(seed: int, restart: int) -> torch.Generator:
    """The random stream of one restart: independent of how many restarts run.  A CPU
    generator whatever the attack's device: draws are made on the CPU and moved, so every
    device starts from the same dummy data."""
    return torch.Generator().manual_seed(
        int(np.random.SeedSequence([int(seed), int(restart)]).generate_state(1)[0]))


def dummy_labels(given: torch.Tensor | None, num_samples: int, num_classes: int,
                 gen: torch.Generator, dtype: torch.dtype,
                 device: torch.device | str = "cpu") -> torch.Tensor:
    """The labels a restart optimises with: the given class ids, or label logits (N, C)
    drawn N(0, 1) (on the CPU, then moved to ``device``) and optimised jointly (DLG),
    which :class:`UpdateSimulator` reads as soft labels softmax(logits)."""
    if given is not None:
        return given
    return torch.randn(num_samples, num_classes, generator=gen,
                       dtype=dtype).to(device).requires_grad_(True)


@dataclass(frozen=True)
class Trial:
    """One restart's result: images in the box, labels (class ids or label logits), and
    its matching loss there."""

    images: torch.Tensor
    labels: torch.Tensor
    loss: float


def final_loss(simulator: UpdateSimulator, distance: Callable[..., torch.Tensor],
               images: torch.Tensor, labels: torch.Tensor, **distance_kw: Any) -> float:
    """The matching loss (no prior) of a restart's returned images and labels; a
    non-finite one (a diverged restart) is +inf so that it is never kept."""
    with torch.enable_grad():
        sim = simulator.simulate(images.detach(), labels.detach())
        value = float(distance(sim, simulator.target, **distance_kw).detach())
    return value if np.isfinite(value) else float("inf")


def keep_best(trials: Sequence[Trial], iterations: int, info: dict[str, Any]) -> Reconstruction:
    """The restart of lowest final matching loss (the first of equal ones), as a
    :class:`Reconstruction`; soft labels become their argmax.  ``info`` gains
    ``restart_losses`` and ``kept_restart``."""
    losses = [t.loss for t in trials]
    best = int(np.argmin(losses))
    if not np.isfinite(losses[best]):
        raise RuntimeError(f"all {len(trials)} restarts diverged (non-finite matching loss); "
                           "try a smaller budget.lr")
    t = trials[best]
    labels = t.labels.argmax(dim=-1) if t.labels.dtype.is_floating_point else t.labels
    return Reconstruction(images=t.images.detach().to("cpu", torch.float32).numpy(),
                          labels=labels.detach().to("cpu", torch.int64).numpy(),
                          loss=losses[best], iterations=iterations,
                          info={**info, "restart_losses": losses, "kept_restart": best})
