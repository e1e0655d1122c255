"""The malicious server's imprint block (Fowl et al. 2022) on real images, outside a run:
how many of a round's samples come back near-exactly from the aggregate of the clients'
one-step updates, against the expected share (k/(k+1))^N (docs/validation.md section 15).

Each round: ``--clients`` clients of ``--per-client`` CIFAR-10 images each (the
``reconstruction`` scenario's data, its seed varied per round), the CNN behind an imprint
block of k bins (thresholds from a Gaussian fit of the mean pixel over the test split: data
the server holds), every client takes one SGD step (lr 0.05) in float32 from the server's
model, the server averages the float32 models (FedAvg, equal weights) and reads the block's
first layer from aggregate - start.  A candidate is near-exact when its PSNR against its
matched true sample (optimal assignment over the round's samples) is >= 40 dB.  ``gain``
is the block's signal (:class:`attacks.imprint.ImprintBlock`): the column
"update" is the median |bias update| of the used bins, against SecAgg+'s quantisation step
for this round's weights (2 clipping_range / quantization_range * max_weight / sum n_i,
Flower's defaults).  Each setting also runs with the aggregate SecAgg+ would release
(:func:`secagg_mean`: Flower's own quantisation of each client's weighted model; the masks
cancel exactly, so they are left out).

    python experiments/imprint_rates.py --data ../shared/data/cifar10-jpeg-10k.npz \\
        --bins 64 256 1024 --gains 1 100 10000 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NEAR_EXACT_DB = 40.0
LR = 0.05


def secagg_mean(models: list[list[np.ndarray]], weights: list[int], seed: int,
                clipping_range: float = 8.0, quantization_range: int = 2 ** 22,
                max_weight: float = 1000.0) -> list[np.ndarray]:
    """The weighted mean SecAgg+ releases, with Flower's own quantisation (its defaults):
    each client quantises w_c * n_c / max_weight (stochastic rounding, seeded here), the
    sum of the integers is dequantised and divided by the sum of the ratios.  The masks
    cancel exactly in SecAgg+'s modular sum, so they are left out."""
    from flwr.common.secure_aggregation.quantization import dequantize, quantize

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        ratios = [n / max_weight for n in weights]
        total = None
        for m, r in zip(models, ratios):
            q = [a.astype(np.int64) for a in quantize([a * r for a in m], clipping_range,
                                                      quantization_range)]
            total = q if total is None else [t + a for t, a in zip(total, q)]
    finally:
        np.random.set_state(state)
    offset = (len(models) - 1) * clipping_range
    return [(a - offset) / sum(ratios)
            for a in dequantize(total, clipping_range, quantization_range)]


def one_round(data, clients: list[np.ndarray], bins: int, gain: float, seed: int,
              secagg: bool) -> dict:
    from attacks.imprint import (expected_recovery_rate, imprint_block_for, imprinted,
                                 recover_images, strongest_candidates)
    from fedaudit.config import load_scenario
    from fedaudit.image_metrics import reconstruction_metrics
    from fedaudit.models.registry import image_model

    shape = tuple(data.x.shape[1:])
    block = imprint_block_for(data.x[data.test], bins, gain)
    task = image_model(load_scenario("reconstruction").model, shape, data.num_classes,
                       seed=seed)
    model = imprinted(task, block)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    models = []
    for ids in clients:
        model.load_state_dict(start)
        x, y = torch.from_numpy(data.x[ids]), torch.from_numpy(data.y[ids]).long()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        grads = torch.autograd.grad(loss, [model[0].linear0.weight, model[0].linear0.bias])
        models.append([(start["0.linear0.weight"] - LR * grads[0]),
                       (start["0.linear0.bias"] - LR * grads[1])])
    if secagg:
        agg = secagg_mean([[t.double().numpy() for t in m] for m in models],
                          [len(ids) for ids in clients], seed)
    else:
        agg = [torch.stack([m[i] for m in models]).mean(0).double().numpy()
               for i in range(2)]  # float32 FedAvg
    dw = agg[0] - start["0.linear0.weight"].double().numpy()
    db = agg[1] - start["0.linear0.bias"].double().numpy()
    # float32 models: bins no sample reached carry the weights' rounding, about 1e-7 of
    # them; 1e-3 of the largest bias difference keeps every bin a sample reached at these
    # gains (the candidates column shows how many), the n largest at most
    ids = np.concatenate(clients)
    images, used = strongest_candidates(*recover_images(dw, db, shape, rtol=1e-3), db, len(ids))
    n = len(ids)
    step = 2 * 8.0 / 2 ** 22 * 1000.0 / n
    out = {"bins": bins, "gain": gain, "secagg": secagg, "samples": n, "candidates": len(images),
           "expected": expected_recovery_rate(n, bins),
           "update": float(np.median(np.abs(np.diff(np.append(db, 0.0))[used])))
           if len(used) else 0.0, "secagg_step": step}
    if len(images):
        met = reconstruction_metrics(np.clip(images, 0, 1).astype(np.float32),
                                     np.zeros(len(images), np.int64), data.x[ids],
                                     np.zeros(n, np.int64), data.x[data.train].mean(0),
                                     data_range=1.0)
        out["near_exact"] = int(np.sum(met.psnr >= NEAR_EXACT_DB))
        out["psnr_median"] = float(np.median(np.minimum(met.psnr, 200.0)))
    else:
        out["near_exact"], out["psnr_median"] = 0, None
    out["share"] = out["near_exact"] / n
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the CIFAR-10 npz (../shared/data/...)")
    ap.add_argument("--bins", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--gains", type=float, nargs="+", default=[1.0, 100.0, 10000.0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--per-client", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    from fedaudit.config import load_scenario
    from fedaudit.data import build_federated_data

    torch.set_num_threads(1)
    rows = []
    for r in range(args.rounds):
        scenario = load_scenario("reconstruction", [
            "data.dataset=npz", f"data.path={args.data}", f"scenario.seed={r}",
            f"federation.num_clients={args.clients}", f"data.client_samples={args.per_client}"])
        data = build_federated_data(scenario)
        for k in args.bins:
            for s in args.gains:
                for sa in (False, True):
                    rows.append({"round": r, **one_round(data, list(data.clients), k, s, r,
                                                         sa)})
                    print(json.dumps(rows[-1]), flush=True)
    t = Table(title=f"imprint block: {args.clients} clients x {args.per_client} CIFAR-10 "
                    f"images, one SGD step, FedAvg aggregate; means over {args.rounds} rounds")
    for col in ("bins k", "gain", "aggregation", "near-exact share", "expected (k/(k+1))^N",
                "candidates", "median PSNR", "update", "SecAgg+ step"):
        t.add_column(col, justify="right")
    for k in args.bins:
        for s in args.gains:
            for sa in (False, True):
                g = [x for x in rows if x["bins"] == k and x["gain"] == s and x["secagg"] == sa]
                med = [x["psnr_median"] for x in g if x["psnr_median"] is not None]
                t.add_row(str(k), f"{s:g}", "SecAgg+" if sa else "FedAvg",
                          f"{np.mean([x['share'] for x in g]):.3f}", f"{g[0]['expected']:.3f}",
                          f"{np.mean([x['candidates'] for x in g]):.1f}",
                          f"{np.mean(med):.1f}" if med else "-",
                          f"{np.median([x['update'] for x in g]):.1e}",
                          f"{g[0]['secagg_step']:.1e}")
    Console(width=160).print(t)


if __name__ == "__main__":
    main()
