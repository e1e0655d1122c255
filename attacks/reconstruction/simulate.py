"""The update the server expects from dummy data: what a gradient-inversion attack matches.

From the global model the client started from (``case.start``) and dummy inputs with
labels, :class:`UpdateSimulator` computes, differentiably with respect to the dummy data:

* **single gradient** (``case.single_gradient()``: one SGD step on one batch): the batch
  gradient g(x) = d/dw L(f_w(x), y) at w = start, compared with the observed gradient
  ``case.gradient()`` (= -update / lr - weight_decay * start);
* **multi-step** (several local SGD steps, Geiping et al. 2020 section 5; Dimitrov et al.
  2022): the client's local training unrolled from ``start`` -- ``local_epochs`` passes
  over the N dummy samples in batches of ``batch_size`` (the last one smaller when
  ``batch_size`` does not divide N), each step torch's SGD

      d_t = g_t + weight_decay * w_t;   b_t = d_t (t = 0),  momentum * b_{t-1} + d_t;
      w_{t+1} = w_t - lr * b_t

  (``torch.optim.SGD`` with dampening 0, no Nesterov: what :func:`fedaudit.training.
  make_optimizer` builds) -- through :func:`torch.func.functional_call` with the
  parameters as tensors of the graph (``create_graph=True`` at every step), compared with
  the observed update ``case.update`` = w_T - w_0.

What the server must know for the multi-step case: lr, momentum, weight decay, epochs,
batch size and the client's number of samples (``case.training``).  It does not know the
order in which the client shuffled its samples in each epoch: with one epoch the order is
immaterial (the dummy samples are unknowns; any assignment to batches is one labelling of
them), with several it assumes the same order every epoch unless ``order`` is given (the
tests pass the client's own to pin the unrolling to the real training).  Adam is refused.

Only trainable parameters are matched: buffers are not gradients (they enter the forward
pass at their ``start`` values).  The simulation runs in the dtype of the start model, on
the device given to :meth:`UpdateSimulator.of`; the observed float64 update is cast to it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import functional_call

from attacks.update_case import UpdateCase

__all__ = ["UpdateSimulator", "soft_cross_entropy"]


def soft_cross_entropy(logits: torch.Tensor, label_logits: torch.Tensor) -> torch.Tensor:
    """DLG's loss with soft labels: (1/B) sum_i sum_c -softmax(l_i)_c log softmax(z_i)_c
    (Zhu et al. 2019), the mean cross-entropy against a label distribution; with one-hot
    labels it is the ordinary mean cross-entropy."""
    return F.cross_entropy(logits, torch.softmax(label_logits, dim=-1))


@dataclass(frozen=True)
class UpdateSimulator:
    """The client's local computation on dummy data, and the observed value to match.

    Build with :meth:`of`; :attr:`target` holds the observed gradient (single) or update
    (multi-step), one tensor per trainable parameter in ``named_parameters`` order
    (:attr:`names`); :meth:`simulate` gives the same for dummy data."""

    case: UpdateCase
    model: torch.nn.Module
    names: tuple[str, ...]
    start: tuple[torch.Tensor, ...]
    buffers: dict[str, torch.Tensor]
    target: tuple[torch.Tensor, ...]
    single: bool

    @classmethod
    def of(cls, case: UpdateCase, device: torch.device | str = "cpu") -> "UpdateSimulator":
        """Check that the case can be simulated (SGD, trainable parameters present) and
        prepare a copy of the model in training mode with the start parameters, on
        ``device`` (the model, its buffers and the target; the dummy data must be there
        too)."""
        t = case.training
        if t.optimizer != "sgd":
            raise ValueError(f"training.optimizer = {t.optimizer!r}: unrolling the local "
                             "training needs SGD (Adam's update is not simulated)")
        names = tuple(n for n, p in case.model.named_parameters() if p.requires_grad)
        if not names:
            raise ValueError("the model has no trainable parameters: nothing to match")
        dtype = case.start[names[0]].dtype
        if not dtype.is_floating_point:
            raise ValueError(f"start[{names[0]!r}] has dtype {dtype}: needs a float model")
        model = copy.deepcopy(case.model).to(dtype).train()
        model.load_state_dict(dict(case.start))
        model.to(device)
        # the copy's own parameters, at the start values, are the leaves of every
        # simulation's graph: one step calls the model as it is (no functional_call's
        # parameter swapping); the attacks differentiate with respect to the dummy data
        # only (autograd.grad), so nothing accumulates in them
        params = dict(model.named_parameters())
        start = tuple(params[n] for n in names)
        buffers = {n: case.start[n].detach().to(device) for n, _ in model.named_buffers()
                   if n in case.start}
        single = case.single_gradient()
        if single:
            observed = case.gradient()
            target = tuple(observed[n].to(device, dtype) for n in names)
        else:
            target = tuple(case.update[n].detach().to(device, dtype) for n in names)
        return cls(case, model, names, start, buffers, target, single)

    @property
    def dtype(self) -> torch.dtype:
        return self.start[0].dtype

    @property
    def device(self) -> torch.device:
        return self.start[0].device

    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if y.dtype.is_floating_point:
            return soft_cross_entropy(out, y)
        return self.case.loss(out, y)

    def _step_loss(self, params: Sequence[torch.Tensor], x: torch.Tensor,
                   y: torch.Tensor) -> torch.Tensor:
        """The loss of one local step's batch with the parameters ``params``."""
        out = functional_call(self.model, {**dict(zip(self.names, params)), **self.buffers},
                              (x,))
        return self._loss(out, y)

    def simulate(self, x: torch.Tensor, y: torch.Tensor,
                 order: Sequence[torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        """The gradient (single) or update (multi-step) the client would send had it
        trained on ``x`` (N, *input_shape) with ``y``: int64 class ids (N,) -- the case's
        loss -- or float label logits (N, C) -- :func:`soft_cross_entropy` of their
        softmax.  Differentiable with respect to ``x`` and float ``y``.  ``order``: one
        permutation of range(N) per local epoch, the order the client visited its samples
        (default: 0..N-1 every epoch)."""
        t = self.case.training
        n = len(x)
        if n != t.num_examples:
            raise ValueError(f"{n} dummy samples, but the client trained on "
                             f"training.num_examples = {t.num_examples}")
        if len(y) != n:
            raise ValueError(f"{len(y)} labels for {n} dummy samples")
        params = self.start
        if self.single:
            return torch.autograd.grad(self._loss(self.model(x), y), params,
                                       create_graph=True)
        if order is not None and len(order) != t.local_epochs:
            raise ValueError(f"order has {len(order)} permutations for "
                             f"training.local_epochs = {t.local_epochs}")
        buf: tuple[torch.Tensor, ...] | None = None
        for epoch in range(t.local_epochs):
            perm = None if order is None else torch.as_tensor(order[epoch])
            for s in range(0, n, t.batch_size):
                idx = (slice(s, s + t.batch_size) if perm is None
                       else perm[s:s + t.batch_size].to(x.device))
                grads = torch.autograd.grad(self._step_loss(params, x[idx], y[idx]), params,
                                            create_graph=True)
                d = tuple(g + t.weight_decay * p if t.weight_decay else g
                          for g, p in zip(grads, params))
                if t.momentum:
                    d = d if buf is None else tuple(t.momentum * b + di
                                                    for b, di in zip(buf, d))
                    buf = d
                params = tuple(p - t.lr * di for p, di in zip(params, d))
        return tuple(p - p0 for p, p0 in zip(params, self.start))
