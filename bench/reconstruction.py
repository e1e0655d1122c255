"""Gradient-inversion cost benchmark (never part of the test suite).
Run: ``python bench/reconstruction.py`` or ``python bench/run.py --only reconstruction``.

:func:`inversion_overhead` -- time of one iteration of the ``inverting-gradients`` attack
(:mod:`attacks.reconstruction`, signed Adam on the cosine distance + TV, box projection)
divided by the time of one iteration of a bare torch loop doing the same work by hand
(the floor): the model called directly (single gradient) or through
``torch.func.functional_call`` (unrolled local steps), ``autograd.grad(create_graph=True)``,
the cosine over all parameters, TV, the backward to the images, sign, Adam step, clamp.
The attack's iteration is its whole call with ``iterations`` iterations divided by
``iterations`` (its set-up and the final scoring pass included).  The update values are
random: the cost does not depend on them.  Medians of interleaved repeats.

:func:`parallel_jobs` -- R (client, round) jobs of a whole run on its W Ray actors
(``update_attacks.runtime = "grid"``) against the same jobs one after another in the
ServerApp's process (``driver``): the stage's seconds (results.json
``reconstruction.seconds``) of two runs of the digits scenario with R clients, each with a
fresh cache; the goal is a speed-up of min(R, W).  W is how many actors Ray runs at once:
the machine's cores over ``federation.client_resources.num_cpus`` (1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attacks.reconstruction import Budget, get_reconstruction  # noqa: E402
from attacks.reconstruction.matching_losses import total_variation  # noqa: E402
from attacks.update_case import LocalTraining, UpdateCase  # noqa: E402
from bench.gnq import _interleaved_medians  # noqa: E402
from fedaudit.models import build_model  # noqa: E402
from fedaudit.training.losses import batch_loss  # noqa: E402

#: (model, channels, image size, samples, client batch): single gradient when batch = samples
CONFIGS = [("mlp", 1, 8, 1, 1), ("mlp", 1, 8, 8, 8), ("cnn", 1, 8, 1, 1), ("cnn", 1, 8, 8, 8),
           ("cnn", 3, 32, 1, 1), ("cnn", 3, 32, 4, 4), ("cnn", 3, 32, 8, 8),
           ("cnn", 3, 32, 4, 1)]
TV = 1e-4
LR = 0.1


def _case(model_name: str, channels: int, size: int, n: int, batch: int) -> UpdateCase:
    model = build_model(model_name, in_channels=channels, image_size=size, num_classes=10,
                        seed=0)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(1)
    update = {k: 1e-3 * torch.randn(v.shape, generator=gen, dtype=torch.float64)
              for k, v in start.items()}
    return UpdateCase(model, start, update, LocalTraining(0.05, 0.0, 0.0, "sgd", 1, batch, n),
                      (channels, size, size), 10, (0.0, 1.0), batch_loss)


def _bare_loop(case: UpdateCase, labels: torch.Tensor, iterations: int) -> None:
    """The floor: the same iterations written directly in torch."""
    model = case.model
    t = case.training
    params = [p for p in model.parameters()]
    names = [n for n, _ in model.named_parameters()]
    if case.single_gradient():
        target = [(-case.update[n] / t.lr).float() for n in names]
    else:
        target = [case.update[n].float() for n in names]
    tnorm = sum(g.pow(2).sum() for g in target).sqrt()
    x = torch.randn(t.num_examples, *case.input_shape, generator=torch.Generator().manual_seed(0))
    x.requires_grad_(True)
    opt = torch.optim.Adam([x], lr=LR)
    for _ in range(iterations):
        if case.single_gradient():
            sim = torch.autograd.grad(F.cross_entropy(model(x), labels), params,
                                      create_graph=True)
        else:
            w = [p.detach().requires_grad_(True) for p in params]
            cur = w
            for s in range(0, t.num_examples, t.batch_size):
                sl = slice(s, s + t.batch_size)
                out = torch.func.functional_call(model, dict(zip(names, cur)), (x[sl],))
                g = torch.autograd.grad(F.cross_entropy(out, labels[sl]), cur,
                                        create_graph=True)
                cur = [c - t.lr * gi for c, gi in zip(cur, g)]
            sim = [c - w0 for c, w0 in zip(cur, w)]
        dot = sum((a * b).sum() for a, b in zip(sim, target))
        snorm = sum(a.pow(2).sum() for a in sim).sqrt()
        loss = 1 - dot / (snorm * tnorm) + TV * total_variation(x)
        x.grad, = torch.autograd.grad(loss, [x])
        x.grad.sign_()
        opt.step()
        with torch.no_grad():
            x.clamp_(0.0, 1.0)


def inversion_overhead(configs=CONFIGS, iterations: int = 20, repeats: int = 5,
                       warmup: int = 1) -> list[dict]:
    """One row per configuration: attack and floor ms per iteration and their ratio."""
    attack = get_reconstruction("inverting-gradients")
    rows = []
    for model_name, channels, size, n, batch in configs:
        case = _case(model_name, channels, size, n, batch)
        labels = torch.arange(n) % 10
        fns = {"attack": lambda: attack(case, num_samples=n, labels=labels.numpy(),
                                        budget=Budget(iterations), seed=0, tv=TV),
               "floor": lambda: _bare_loop(case, labels, iterations)}
        t = _interleaved_medians(fns, repeats, warmup)
        rows.append({"model": f"{model_name} {channels}x{size}x{size}", "samples": n,
                     "local_steps": case.training.steps, "iterations": iterations,
                     "repeats": repeats,
                     "attack_ms_per_iteration": 1e3 * t["attack"] / iterations,
                     "floor_ms_per_iteration": 1e3 * t["floor"] / iterations,
                     "ratio": t["attack"] / t["floor"]})
    return rows


def parallel_jobs(jobs: int = 8, iterations: int = 400, model: str = "cnn") -> dict:
    """Seconds of the reconstruction stage for ``jobs`` jobs on the grid and in-process."""
    import os
    import tempfile

    import fedaudit

    out: dict = {"jobs": jobs, "iterations": iterations, "model": model,
                 "workers": os.cpu_count()}
    for runtime in ("driver", "grid"):
        with tempfile.TemporaryDirectory() as tmp:
            run = fedaudit.run("reconstruction-digits", out=tmp, progress=False,
                               cache=Path(tmp) / "cache",
                               overrides=[f"federation.num_clients={jobs}",
                                          f"model.name={model}",
                                          f"reconstruction.iterations={iterations}",
                                          "label_leakage.methods=['bias-count']",
                                          f"update_attacks.runtime={runtime}"])
            rec = run.results["reconstruction"]
            out[f"{runtime}_seconds"] = rec["seconds"]
            out[f"{runtime}_ran_on"] = rec["ran_on"]
    out["speedup"] = out["driver_seconds"] / out["grid_seconds"]
    out["ideal"] = min(jobs, out["workers"])
    return out


def print_parallel(res: dict, console) -> None:
    from rich.table import Table

    s = Table(title=f"{res['jobs']} update jobs ({res['model']}, {res['iterations']} "
                    "iterations each): the run's Ray actors vs one after another")
    for col in ("jobs", "Ray workers", "in-process s", "on the actors s", "speed-up",
                "ideal"):
        s.add_column(col, justify="right")
    s.add_row(str(res["jobs"]), str(res["workers"]), f"{res['driver_seconds']:.1f}",
              f"{res['grid_seconds']:.1f}", f"{res['speedup']:.2f}", str(res["ideal"]))
    console.print(s)


def print_table(rows: list[dict], console) -> None:
    from rich.table import Table

    s = Table(title="one inversion iteration (inverting-gradients) vs a bare torch loop of "
                    "the same double backward (medians)")
    for col in ("model", "samples", "local steps", "attack ms/it", "floor ms/it", "ratio"):
        s.add_column(col, justify="right")
    for r in rows:
        s.add_row(r["model"], str(r["samples"]), str(r["local_steps"]),
                  f"{r['attack_ms_per_iteration']:.2f}", f"{r['floor_ms_per_iteration']:.2f}",
                  f"{r['ratio']:.2f}")
    console.print(s)


if __name__ == "__main__":
    from rich.console import Console

    torch.set_num_threads(1)
    print_table(inversion_overhead(), Console())
    print_parallel(parallel_jobs(), Console())
