"""``dlg``: Zhu, Liu and Han 2019, "Deep Leakage from Gradients", NeurIPS.

Threat model: as :mod:`~attacks.reconstruction.inverting_gradients` (the server knows the
architecture, the start model, the training recipe and the number of samples); the
labels are given or, as in the paper, optimised jointly as soft labels.  It looks for
dummy images x and label logits l that minimise the squared Euclidean distance

    || U(x, softmax(l)) - U* ||^2

between the simulated and the observed gradient (one local step) or update (several
steps, unrolled; :class:`~attacks.reconstruction.simulate.UpdateSimulator`),
:func:`~attacks.reconstruction.matching_losses.squared_l2`.

The optimiser is the paper's L-BFGS (``torch.optim.LBFGS``, step size 1, no line search,
as their code), one L-BFGS iteration -- one evaluation of the loss and its gradient -- per
``budget.iterations`` (their code runs 300 ``step`` calls of up to 20 iterations each; the
curvature history carries over between calls, so N calls of one iteration are one run of
N iterations), or Adam (``optimizer = "adam"``, lr 0.1 unless ``budget.lr``).  The dummy
data start as N(0, 1) draws, as in the paper, and are not constrained during the
optimisation (DLG has no box); the returned images are clamped into ``case.box`` and the
kept restart's loss is the distance there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attacks.iteration_progress import iteration_done
from attacks.reconstruction.matching_losses import squared_l2
from attacks.reconstruction.registry import (Budget, Reconstruction, register_reconstruction,
                                             resolve_options)
from attacks.reconstruction.trials import (Trial, check_call, dummy_labels, final_loss,
                                           keep_best, restart_generator)
from attacks.update_case import UpdateCase
from fedaudit.options import option

NAME = "dlg"
#: default step sizes: L-BFGS's 1 (the paper's), Adam's 0.1
DEFAULT_LR = {"lbfgs": 1.0, "adam": 0.1}


@register_reconstruction(NAME, label="DLG", joint_labels=True, options={
    "optimizer": option(str, "lbfgs", "L-BFGS as in the paper, or Adam",
                        choices=tuple(DEFAULT_LR)),
})
def dlg(case: UpdateCase, *, num_samples: int, labels: np.ndarray | None, budget: Budget,
        seed: int, **options: Any) -> Reconstruction:
    """Rebuild the client's ``num_samples`` images (and labels) from its update (module
    docstring)."""
    opts = resolve_options(NAME, options)
    simulator, given = check_call(NAME, case, num_samples, labels, budget, seed,
                                  joint_labels=True)
    dtype, device = simulator.dtype, simulator.device
    lr = budget.lr if budget.lr is not None else DEFAULT_LR[opts["optimizer"]]
    low, high = case.box
    trials = []
    for restart in range(budget.restarts):
        gen = restart_generator(seed, restart)
        x = torch.randn((num_samples, *case.input_shape), generator=gen,
                        dtype=dtype).to(device).requires_grad_(True)
        y = dummy_labels(given, num_samples, case.num_classes, gen, dtype, device)
        variables = [x, y] if given is None else [x]

        def closure() -> torch.Tensor:
            loss = squared_l2(simulator.simulate(x, y), simulator.target)
            for v, g in zip(variables, torch.autograd.grad(loss, variables)):
                v.grad = g
            return loss.detach()

        if opts["optimizer"] == "lbfgs":
            opt = torch.optim.LBFGS(variables, lr=lr, max_iter=1, history_size=100)
        else:
            opt = torch.optim.Adam(variables, lr=lr)
        for it in range(budget.iterations):
            opt.step(closure)
            iteration_done(restart * budget.iterations + it + 1,
                           budget.restarts * budget.iterations)
        images = x.detach().clamp(low, high)
        trials.append(Trial(images, y.detach(),
                            final_loss(simulator, squared_l2, images, y)))
    return keep_best(trials, budget.iterations, {
        "labels": "given" if given is not None else "joint",
        "single_gradient": simulator.single, "local_steps": case.training.steps,
        "lr": lr, **opts})
