"""Checks of lab 10, what the server sees: labels and images rebuilt from a client's update.

Each check recomputes the answer with fedaudit's own code (the last layer's gradient,
:mod:`attacks.reconstruction.matching_losses`, :mod:`fedaudit.image_metrics`) and names
the classic mistake when the student's answer is one: the update's sign, L2 where the
cosine is asked, a cosine per layer, a target gradient that is not detached, matching at
the model after the update instead of the one the client started from, images outside
their box, scoring reconstructions in the order the attack returned them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from fedaudit.labs.checks import as_array, as_number, call, direction, fail, ok
from fedaudit.labs.todo import require
from fedaudit.labs.updates import ClientUpdate

#: float32 arithmetic on losses of order 1: the student's loss and the reference agree to
#: a few float32 eps (1.2e-7) times the number of summed terms (hundreds); 1e-4 has margin
LOSS_TOL = 1e-4
#: a reconstruction of 8 x 8 digits a student can recognise; the solution reaches > 40 dB
PSNR_GOAL = 25.0


def _last_linear(update) -> str:
    return [k for k in update.start if k.endswith("weight")][-1]


def label_from_update(value, update) -> None:
    """Task 10.1: the label of a one-sample update, read from the last layer."""
    task = "10.1"
    got = int(as_number(task, value, "label"))
    w = _last_linear(update)
    rows = (-update.update(w) / update.lr).sum(dim=1)  # the gradient's rows, summed
    want = int(rows.argmin())
    if got == want:
        ok(task, f"the update gives away the label: {want} (row {want} of the last layer's "
                 "gradient sums to a negative number)")
        return
    if got == int(rows.argmax()):
        fail(task, "that is the most POSITIVE row of the gradient: the gradient is "
                   "-(received - start) / lr, the update's opposite; take the row whose sum "
                   "is negative")
    fail(task, f"label {got} is not the one the last layer shows; sum each ROW of the last "
               "Linear layer's weight gradient (one row per class) and take the negative one")


def _toy_grads(seed: int, requires_grad: bool = False):
    g = torch.Generator().manual_seed(seed)
    shapes = [(6, 5), (6,), (3, 6), (3,)]
    dummy = [torch.randn(s, generator=g) for s in shapes]
    target = [torch.randn(s, generator=g).requires_grad_(requires_grad) for s in shapes]
    x = torch.rand((2, 1, 4, 4), generator=g)
    return dummy, target, x


def _cosine(a, b) -> torch.Tensor:
    from attacks.reconstruction.matching_losses import cosine_distance

    return cosine_distance(a, b)


def _tv(x) -> torch.Tensor:
    from attacks.reconstruction.matching_losses import total_variation

    return total_variation(x)


def matching_loss(fn) -> None:
    """Task 10.2: ``fn(dummy_grads, target_grads, x, tv)`` = 1 - cosine of the two
    gradients over all parameters together + tv * total variation of x."""
    task = "10.2"
    require(fn, task)
    for seed, tv in ((0, 0.0), (1, 0.5)):
        dummy, target, x = _toy_grads(seed)
        got = as_number(task, call(task, fn, dummy, target, x, tv), "the loss")
        cos, tv_x = float(_cosine(dummy, target)), float(_tv(x))
        want = cos + tv * tv_x
        if abs(got - want) <= LOSS_TOL:
            continue
        l2 = float(sum((d - t).pow(2).sum() for d, t in zip(dummy, target)))
        per_layer = float(np.mean([float(_cosine([d], [t])) for d, t in zip(dummy, target)]))
        if any(abs(got - v) <= 1e-3 * max(1.0, l2) for v in (l2, l2 + tv * tv_x)):
            fail(task, "that is the L2 distance (DLG's); Inverting Gradients asks for the "
                       "cosine distance, 1 - <g, g'> / (|g| |g'|): blind to the update's scale")
        if abs(got - per_layer - tv * tv_x) <= LOSS_TOL:
            fail(task, "one cosine per layer, averaged: take ONE cosine over all parameters "
                       "together (sum the dot products and the squared norms over the layers)")
        if tv and abs(got - cos) <= LOSS_TOL:
            fail(task, "the total-variation term is missing: add tv * TV(x)")
        if tv and abs(got - cos - tv * _tv_sum(x)) <= LOSS_TOL:
            fail(task, "TV is the MEAN absolute difference of neighbouring pixels, "
                       "horizontally plus vertically, not their sum")
        fail(task, f"your loss is {direction(got, want)} (toy gradients, tv = {tv}); "
                   "1 - cosine over all parameters + tv * mean |pixel differences|")
    dummy, target, x = _toy_grads(2, requires_grad=True)
    loss = call(task, fn, dummy, target, x, 0.1)
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        loss.backward()
        if any(t.grad is not None for t in target):
            fail(task, "the target gradient is data, not a variable: detach it "
                       "(t.detach()) so nothing flows back into it")
    ok(task, "1 - cosine over all parameters + tv * TV(x)")


def _tv_sum(x: torch.Tensor) -> float:
    return float((x[..., :, 1:] - x[..., :, :-1]).abs().sum()
                 + (x[..., 1:, :] - x[..., :-1, :]).abs().sum())


def _psnr(task: str, fn, update) -> float:
    """Mean matched PSNR of ``fn(update, update.y)``; out-of-box images fail."""
    from fedaudit.labs.updates import matched_psnr

    arr = as_array(task, call(task, fn, update, update.y), "the images", shape=update.x.shape)
    if arr.min() < -1e-6 or arr.max() > 1 + 1e-6:
        fail(task, f"your images range over [{arr.min():.2f}, {arr.max():.2f}]: the digits "
                   "are in [0, 1] -- clamp the dummy images to that box after every step "
                   "(and do not normalise them)")
    psnr = matched_psnr(arr, update.x)
    return float(np.mean(psnr[np.isfinite(psnr)])) if np.isfinite(psnr).any() else np.inf


@dataclass(frozen=True)
class _ReceivedIsStart(ClientUpdate):
    """A probe: the same update, but ``received`` holds the START weights (a correct
    attack reads the update only through :meth:`update`)."""

    true_received: dict = field(default_factory=dict)

    def update(self, name: str) -> torch.Tensor:
        return self.true_received[name].double() - self.start[name].double()


def rebuild(fn, update) -> None:
    """Task 10.3: ``fn(update, labels)`` rebuilds images that resemble the client's (mean
    PSNR >= PSNR_GOAL after an optimal assignment), also from the same update sent with a
    50x learning rate.  When it does not, two probes tell the classic mistakes apart: the update negated (``received = start - (received - start)``:
    a rebuild with the wrong sign succeeds on it) and ``received`` replaced by the start
    weights with the same update (a rebuild that differentiates at the received model
    succeeds on it)."""
    task = "10.3"
    require(fn, task)
    mean = _psnr(task, fn, update)
    if mean >= PSNR_GOAL:
        # a one-step update with lr x 50 is the update x 50: the same target gradient, so a
        # correct rebuild gives the same images; one that differentiates at the received
        # model (now far from the start) does not -- at lr 0.1 the two models are close
        # enough for that mistake to pass
        far = replace(update, lr=50 * update.lr,
                      received={k: update.start[k] + 50 * (update.received[k] - update.start[k])
                                for k in update.start})
        if update.epochs == 1 and _psnr(task, fn, far) < PSNR_GOAL:
            fail(task, "you differentiate at the model AFTER the update (it only works "
                       "while the client's step is small): the client computed its gradient "
                       "at the model it started from (update.model, weights update.start)")
        ok(task, f"PSNR {mean:.1f} dB over the client's {update.num_examples} digit(s): the "
                 "server sees the images")
        return
    negated = replace(update, received={k: 2 * update.start[k] - update.received[k]
                                        for k in update.start})
    if _psnr(task, fn, negated) >= PSNR_GOAL:
        fail(task, "your images match the OPPOSITE of the client's gradient: the gradient "
                   "is -(received - start) / lr")
    probe = _ReceivedIsStart(**{**update.__dict__, "received": dict(update.start),
                                "true_received": update.received})
    if _psnr(task, fn, probe) >= PSNR_GOAL:
        fail(task, "you differentiate at the model AFTER the update: the client computed "
                   "its gradient at the model it started from (update.model, whose weights "
                   "are update.start), not at update.received")
    fail(task, f"PSNR {mean:.1f} dB is below {PSNR_GOAL:g} dB: the images do not match the "
               "update yet (more iterations? Adam step 0.1? the dummy gradient needs "
               "create_graph=True to be differentiated)")


def mean_psnr(fn) -> None:
    """Task 10.4: ``fn(images, true)`` = mean PSNR (dB, data range 1) of the true images
    against the reconstructions an optimal assignment on the MSE gives them."""
    from fedaudit.labs.updates import matched_psnr

    task = "10.4"
    rng = np.random.default_rng(0)
    true = rng.random((4, 1, 8, 8))
    rec = np.clip(true[[2, 0, 3, 1]] + rng.normal(0, 0.05 * np.arange(1, 5)[:, None, None, None],
                                                  true.shape), 0, 1)
    got = as_number(task, call(task, fn, rec, true), "the mean PSNR")
    psnr = matched_psnr(rec, true)
    want = float(psnr.mean())
    if abs(got - want) <= 1e-6 * abs(want):  # float64 arithmetic on the same numbers
        ok(task, "each reconstruction scored against the true image an optimal assignment "
                 "gives it")
        return
    mse_in_order = ((rec - true) ** 2).reshape(4, -1).mean(axis=1)
    if abs(got - float(np.mean(10 * np.log10(1 / mse_in_order)))) <= 1e-6 * abs(want):
        fail(task, "you scored the reconstructions in the order the attack returned them: "
                 "match each to a true image first (scipy.optimize.linear_sum_assignment on "
                 "the MSE matrix)")
    if abs(got - (want + 20 * np.log10(255))) <= 1e-6 * abs(want):
        fail(task, "the images are in [0, 1]: PSNR = 10 log10(1 / MSE), data range 1")
    matched_mse = 10.0 ** (-psnr / 10)  # PSNR = 10 log10(1 / MSE)
    if abs(got - 10 * np.log10(1 / matched_mse.mean())) <= 1e-6 * abs(want):
        fail(task, "that is the PSNR of the mean MSE; take the mean of the per-image PSNRs")
    fail(task, f"your mean PSNR is {direction(got, want)}: 10 log10(1 / MSE) per matched "
               "pair, then the mean")


def imprint_readout(images, r) -> None:
    """Task 10.5: ``images`` = the inputs the imprint block separated, read from the round's
    aggregate: one per bin whose bias changed, (dW_i - dW_{i+1}) / (db_i - db_{i+1})."""
    from attacks.imprint import block_update, recover_images

    task = "10.5"
    got = as_array(task, images, "the images you read back")
    dw, db = block_update(r.start, r.aggregate)
    # float32 models: the reference keeps the bins whose bias difference exceeds 1e-3 of
    # the largest (the rest is rounding); the lone samples come back to ~1e-6
    want, _ = recover_images(dw, db, (1, 8, 8), rtol=1e-3)
    lone = [i for i, xi in enumerate(r.x)
            if np.abs(want.reshape(len(want), -1) - xi.ravel()).max(axis=1).min() < 1e-3]
    if got.ndim != 4 or got.shape[1:] != (1, 8, 8):
        fail(task, f"images has shape {got.shape}: return one (1, 8, 8) image per bin "
                   "(reshape each row of the weight difference)")
    flat = got.reshape(len(got), -1)
    found = [i for i in lone if len(flat)
             and np.abs(flat - r.x[i].ravel()).max(axis=1).min() < 1e-3]
    if len(found) == len(lone):
        ok(task, f"{len(lone)} of the round's {len(r.x)} digits read back exactly from the "
                 "aggregate: the ones alone in their bin")
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = dw / db[:, None]
    direct = direct[np.all(np.isfinite(direct), axis=1)]
    near = [len(direct) and np.abs(direct - row).max(axis=1).min() < 1e-6 for row in flat]
    if len(flat) and np.mean(near) > 0.5:
        fail(task, "a row of the weight update divided by its bias update is the MEAN of "
                   "every sample above that bin's threshold: take the difference of "
                   "consecutive bins (row i minus row i + 1) first")
    if len(flat) and np.median(flat.mean(axis=1)) < 0:
        fail(task, "your images are negative: the weight and bias differences must be "
                   "taken in the same direction")
    fail(task, f"{len(found)} of the {len(lone)} digits alone in a bin came back; compare "
               "consecutive bins, the last one against zero, and keep the bins whose bias "
               "difference is not (nearly) zero")
