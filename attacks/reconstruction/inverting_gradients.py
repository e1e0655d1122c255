"""``inverting-gradients``: Geiping, Bauermeister, Droege and Moeller 2020, "Inverting
Gradients -- How easy is it to break privacy in federated learning?", NeurIPS.

Threat model: an honest-but-curious server that knows the architecture, the global model
the client started from, its local-training recipe and its number of samples
(:class:`attacks.update_case.UpdateCase`), and optionally the labels (the label-leakage
family's guess, or the truth).  It looks for N images x in the box [low, high] that
minimise

    1 - cos(U(x, y), U*)  +  alpha_TV * TV(x)

where U* is the observed gradient (one local step) or update (several: the local SGD
unrolled, :class:`~attacks.reconstruction.simulate.UpdateSimulator`), U(x, y) the same
simulated on x, cos the cosine over all parameters together with per-parameter weights
(:func:`~attacks.reconstruction.matching_losses.cosine_distance`; ``weighting`` =
equal in the paper, ``linear`` / ``exp`` as in their code) and TV the total variation
(:func:`~attacks.reconstruction.matching_losses.total_variation`).

The optimiser follows the paper's code (``inversefed``): Adam on the images (lr 0.1 by
default), the learning rate divided by 10 at 3/8, 5/8 and 7/8 of the iterations
(``lr_decay``), **signed gradients** (``signed``, on by default as in their
``reconstruct_image.py``: Adam steps on sign(dL/dx)),
and the box constraint as a projection: the images are clamped to ``case.box`` after
every step (their ``boxed``).  Initialisation: N(0, 1) draws (their ``randn``, then
projected into the box by the first step) or uniform in the box (``init``).  Without
labels they are optimised jointly as soft labels (their code's DLG fallback for N > 1;
the iDLG shortcut for N = 1 belongs to the label-leakage family: pass its guess).  Of
``budget.restarts`` restarts the one of lowest final cosine distance (without the prior,
their ``scoring_choice='loss'``) is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attacks.iteration_progress import iteration_done
from attacks.reconstruction.matching_losses import (WEIGHTINGS, cosine_distance,
                                                    parameter_weights, total_variation)
from attacks.reconstruction.registry import (Budget, Reconstruction, register_reconstruction,
                                             resolve_options)
from attacks.reconstruction.trials import (Trial, check_call, dummy_labels, final_loss,
                                           keep_best, restart_generator)
from attacks.update_case import UpdateCase
from fedaudit.options import option

NAME = "inverting-gradients"
#: the paper's Adam step size
DEFAULT_LR = 0.1
INITS = ("randn", "uniform")
KEEPS = ("last", "best")
#: ``tv = "auto"``: (smallest image area in pixels, weight) -- the natural-image prior for
#: images of 16 x 16 pixels or more, almost none below (docs/validation.md section 22:
#: CIFAR-10 at 32 x 32 and 16 x 16 and MNIST gain 5-9 dB from TV 0.1; the 8 x 8 digits
#: lose 29)
AUTO_TV = ((16 * 16, 0.1), (0, 1e-4))


def auto_tv(input_shape: tuple[int, ...]) -> float:
    """The total-variation weight ``tv = "auto"`` gives images of ``input_shape`` (C, H,
    W): :data:`AUTO_TV`'s weight for the first area H x W reaches; 0 for inputs that are
    not images."""
    if len(input_shape) != 3:
        return 0.0
    area = int(input_shape[1]) * int(input_shape[2])
    return next(w for least, w in AUTO_TV if area >= least)


def _check_tv(v: Any) -> str | None:
    if v == "auto" or (isinstance(v, (int, float)) and not isinstance(v, bool)
                       and np.isfinite(v) and v >= 0):
        return None
    return f"{v!r} is not allowed; allowed: 'auto' or a number >= 0"


def initial_images(shape: tuple[int, ...], box: tuple[float, float], init: str,
                   gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A restart's starting images (on the CPU, from ``gen``): N(0, 1) draws (``randn``)
    or uniform in the box."""
    if init == "randn":
        return torch.randn(shape, generator=gen, dtype=dtype)
    low, high = box
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=dtype)


@register_reconstruction(NAME, label="Inverting Gradients", joint_labels=True, options={
    "tv": option((str, float), "auto", "weight alpha_TV of the total-variation prior, or "
                 "auto: 0.1 for images of 16 x 16 pixels or more, 1e-4 for smaller ones "
                 "(docs/algorithms.md section 15)", check=_check_tv),
    "signed": option(bool, True, "Adam steps on the sign of the image gradient (the "
                                 "paper's code)"),
    "weighting": option(str, "equal", "per-parameter weights of the cosine (equal, as in "
                                      "the paper; linear or exp, as in its code)",
                        choices=WEIGHTINGS),
    "lr_decay": option(bool, True, "divide the step size by 10 at 3/8, 5/8 and 7/8 of the "
                                   "iterations"),
    "init": option(str, "randn", "starting images: N(0, 1) draws, or uniform in the box",
                   choices=INITS),
    "keep": option(str, "last", "the images a restart returns: its last iterate, or the "
                                "iterate of lowest objective (matching loss + prior) seen",
                   choices=KEEPS),
})
def inverting_gradients(case: UpdateCase, *, num_samples: int, labels: np.ndarray | None,
                        budget: Budget, seed: int, **options: Any) -> Reconstruction:
    """Rebuild the client's ``num_samples`` images from its update (module docstring)."""
    opts = resolve_options(NAME, options)
    simulator, given = check_call(NAME, case, num_samples, labels, budget, seed,
                                  joint_labels=True)
    if opts["tv"] == "auto":
        opts["tv"] = auto_tv(case.input_shape)
    if opts["tv"] > 0 and len(case.input_shape) != 3:
        raise ValueError(f"{NAME}: option tv > 0 needs images (C, H, W), got input_shape "
                         f"{case.input_shape}; set tv = 0")
    dtype, device = simulator.dtype, simulator.device
    weights = parameter_weights(opts["weighting"], len(simulator.names), dtype=dtype)
    weights = None if weights is None else weights.to(device)
    lr = budget.lr if budget.lr is not None else DEFAULT_LR
    low, high = case.box
    its = budget.iterations
    trials = []

    def objective(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """What the loop minimises: the matching loss plus the prior."""
        loss = cosine_distance(simulator.simulate(x, y), simulator.target, weights)
        return loss + opts["tv"] * total_variation(x) if opts["tv"] > 0 else loss

    for restart in range(budget.restarts):
        gen = restart_generator(seed, restart)
        x = initial_images((num_samples, *case.input_shape), case.box, opts["init"], gen,
                           dtype).to(device).requires_grad_(True)
        y = dummy_labels(given, num_samples, case.num_classes, gen, dtype, device)
        variables = [x, y] if given is None else [x]
        opt = torch.optim.Adam(variables, lr=lr)
        milestones = [its * 3 // 8, its * 5 // 8, its * 7 // 8] if opts["lr_decay"] else []
        schedule = torch.optim.lr_scheduler.MultiStepLR(opt, milestones, gamma=0.1)
        best = _BestIterate()
        for it in range(its):
            loss = objective(x, y)
            if opts["keep"] == "best" and (it > 0 or opts["init"] == "uniform"):
                best.offer(float(loss.detach()), x, y)  # a N(0, 1) start is not in the box
            grads = torch.autograd.grad(loss, variables)
            x.grad = grads[0].sign() if opts["signed"] else grads[0]
            if given is None:
                y.grad = grads[1]
            opt.step()
            schedule.step()
            with torch.no_grad():
                x.clamp_(low, high)
            iteration_done(restart * its + it + 1, budget.restarts * its)
        if opts["keep"] == "last":
            images, y = x.detach(), y.detach()
        else:  # the last iterate too: the loop evaluated the objective before each step only
            with torch.enable_grad():
                last = float(objective(x.detach(), y.detach()).detach())
            images, y = best.final(last, x, y)
        trials.append(Trial(images, y,
                            final_loss(simulator, cosine_distance, images, y, weights=weights)))
    return keep_best(trials, its, {
        "labels": "given" if given is not None else "joint",
        "single_gradient": simulator.single, "local_steps": case.training.steps,
        "lr": lr, **opts})


class _BestIterate:
    """The iterate of lowest objective seen (``keep = best``, breaching's choice): each
    loop evaluates the objective at the current images before stepping, so the images and
    labels are copied when it improves (from the first projected iterate on: a N(0, 1)
    start lies outside the box); non-finite values are never kept."""

    def __init__(self) -> None:
        self.value = float("inf")
        self.images: torch.Tensor | None = None
        self.labels: torch.Tensor | None = None

    def offer(self, value: float, x: torch.Tensor, y: torch.Tensor) -> None:
        if value < self.value:  # False for nan
            self.value = value
            self.images, self.labels = x.detach().clone(), y.detach().clone()

    def final(self, value: float, x: torch.Tensor, y: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """The best iterate, the last one included (its objective ``value``)."""
        self.offer(value, x, y)
        if self.images is None:  # every iterate non-finite: the restart diverged
            return x.detach(), y.detach()
        return self.images, self.labels
