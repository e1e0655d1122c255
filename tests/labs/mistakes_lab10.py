"""Lab 10's mistakes (what the server sees), fed to their checks: the rows of
tests/labs/mistakes.py's ``MISTAKES`` for tasks 10.1-10.4, and a reference rebuild with
each of task 10.3's mistakes."""

from __future__ import annotations

import numpy as np


def lab10_rebuild(update, labels=None, *, at: str = "start", sign: float = 1.0,
                  iterations: int = 100):
    """A reconstruction as task 10.3 asks for it, or with one of its mistakes: the gradient
    taken at the ``received`` model, or the target's ``sign`` flipped."""
    import copy

    import torch
    import torch.nn.functional as F

    from attacks.reconstruction.matching_losses import cosine_distance, total_variation

    model = copy.deepcopy(update.model)
    if at == "received":
        model.load_state_dict(update.received)
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    target = [(-sign * update.update(n) / update.lr).float() for n in names]
    y = torch.as_tensor(update.y if labels is None else labels)
    x = torch.rand((update.num_examples, *update.x.shape[1:]),
                   generator=torch.Generator().manual_seed(0), requires_grad=True)
    opt = torch.optim.Adam([x], lr=0.1)
    for _ in range(iterations):
        opt.zero_grad()
        dummy = torch.autograd.grad(F.cross_entropy(model(x), y), params, create_graph=True)
        (cosine_distance(dummy, target) + 1e-4 * total_variation(x)).backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(0.0, 1.0)
    return x.detach().numpy()


def _lab10_losses():
    """Task 10.2's matching loss, right and with each mistake the task warns about."""
    def cos(d, t):
        dot = sum((a * b).sum() for a, b in zip(d, t))
        return 1 - dot / (sum(a.pow(2).sum() for a in d).sqrt()
                          * sum(b.pow(2).sum() for b in t).sqrt())

    def tv_mean(x):
        return ((x[..., :, 1:] - x[..., :, :-1]).abs().mean()
                + (x[..., 1:, :] - x[..., :-1, :]).abs().mean())

    def tv_sum(x):
        return ((x[..., :, 1:] - x[..., :, :-1]).abs().sum()
                + (x[..., 1:, :] - x[..., :-1, :]).abs().sum())

    return {
        "right": lambda d, t, x, tv: cos(d, [b.detach() for b in t]) + tv * tv_mean(x),
        "L2": lambda d, t, x, tv: sum((a - b.detach()).pow(2).sum() for a, b in zip(d, t))
        + tv * tv_mean(x),
        "per layer": lambda d, t, x, tv: sum(cos([a], [b.detach()]) for a, b in zip(d, t))
        / len(d) + tv * tv_mean(x),
        "no TV": lambda d, t, x, tv: cos(d, [b.detach() for b in t]),
        "TV summed": lambda d, t, x, tv: cos(d, [b.detach() for b in t]) + tv * tv_sum(x),
        "not detached": lambda d, t, x, tv: cos(d, t) + tv * tv_mean(x),
    }


def _lab10_psnr(kind):
    from scipy.optimize import linear_sum_assignment

    def fn(images, true):
        n = len(images)
        mse = ((np.asarray(images)[:, None] - true[None]) ** 2).reshape(n, len(true), -1).mean(-1)
        if kind == "in order":
            return float(np.mean(10 * np.log10(1.0 / np.diag(mse))))
        r, c = linear_sum_assignment(mse)
        if kind == "255":
            return float(np.mean(10 * np.log10(255.0 ** 2 / mse[r, c])))
        return float(10 * np.log10(1.0 / mse[r, c].mean()))  # the PSNR of the mean MSE
    return fn


def _lab10_imprint(kind):
    """Task 10.5's read-out, right or with one of its mistakes."""
    import torch

    from fedaudit.labs.updates import imprinted_round

    r = imprinted_round()
    w = (r.aggregate["0.linear0.weight"] - r.start["0.linear0.weight"]).double()
    b = (r.aggregate["0.linear0.bias"] - r.start["0.linear0.bias"]).double()
    dw = w - torch.cat([w[1:], torch.zeros_like(w[:1])])
    db = b - torch.cat([b[1:], torch.zeros(1, dtype=b.dtype)])
    if kind == "no difference":
        dw, db = w, b
    if kind == "opposite signs":
        db = -db
    keep = db.abs() > 1e-3 * db.abs().max()
    images = (dw[keep] / db[keep, None]).numpy()
    return (images if kind == "flat" else images.reshape(-1, 1, 8, 8)), r


def mistakes():
    from fedaudit.labs.checks import inversion as inv
    from fedaudit.labs.updates import client_update

    one = client_update(1)
    rows = (-one.update("5.weight") / one.lr).sum(dim=1)
    losses = _lab10_losses()
    return [
        ("10.1", "the most positive row (the update's sign)",
         lambda: inv.label_from_update(int(rows.argmax()), one), "POSITIVE"),
        ("10.2", "L2 where the cosine is asked",
         lambda: inv.matching_loss(losses["L2"]), "cosine distance"),
        ("10.2", "a cosine per layer", lambda: inv.matching_loss(losses["per layer"]),
         "ONE cosine"),
        ("10.2", "no total variation", lambda: inv.matching_loss(losses["no TV"]),
         "total-variation term is missing"),
        ("10.2", "total variation summed", lambda: inv.matching_loss(losses["TV summed"]),
         "MEAN absolute"),
        ("10.2", "the target gradient not detached",
         lambda: inv.matching_loss(losses["not detached"]), "detach"),
        ("10.3", "images normalised to [-1, 1]",
         lambda: inv.rebuild(lambda u, y: lab10_rebuild(u, y) * 2 - 1, one), "clamp"),
        ("10.3", "matched at the model after the update",
         lambda: inv.rebuild(lambda u, y: lab10_rebuild(u, y, at="received"), one),
         "AFTER the update"),
        ("10.3", "matched at the model after the update, 400 iterations",
         lambda: inv.rebuild(lambda u, y: lab10_rebuild(u, y, at="received", iterations=400),
                             one), "AFTER the update"),
        ("10.3", "the update's sign",
         lambda: inv.rebuild(lambda u, y: lab10_rebuild(u, y, sign=-1.0), one), "OPPOSITE"),
        ("10.3", "too few iterations",
         lambda: inv.rebuild(lambda u, y: lab10_rebuild(u, y, iterations=3), one),
         "more iterations"),
        ("10.4", "reconstructions scored in the attack's order",
         lambda: inv.mean_psnr(_lab10_psnr("in order")), "optimal|linear_sum_assignment"),
        ("10.4", "data range 255", lambda: inv.mean_psnr(_lab10_psnr("255")), "data range 1"),
        ("10.4", "the PSNR of the mean MSE", lambda: inv.mean_psnr(_lab10_psnr("mean mse")),
         "mean of the per-image PSNRs"),
        ("10.5", "each bin's own ratio, no difference of consecutive bins",
         lambda: inv.imprint_readout(*_lab10_imprint("no difference")), "MEAN"),
        ("10.5", "weight and bias differences in opposite directions",
         lambda: inv.imprint_readout(*_lab10_imprint("opposite signs")), "negative"),
        ("10.5", "flat rows, not images",
         lambda: inv.imprint_readout(*_lab10_imprint("flat")), "one \\(1, 8, 8\\) image"),
    ]

